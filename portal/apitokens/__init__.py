"""Per-user API tokens: ``Authorization: Bearer gpb_<secret>``, stored only as a hash."""
