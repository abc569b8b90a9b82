"""Modules stay under 500 lines (the code style's limit): a longer one is split by what it does."""
from __future__ import annotations

from tests.conventions.test_state_writes import ROOT, product_modules

LIMIT = 500


def test_no_product_module_is_over_500_lines():
    long = {p.relative_to(ROOT).as_posix(): n for p in product_modules()
            if (n := len(p.read_text().splitlines())) > LIMIT}
    assert long == {}, f"over {LIMIT} lines: {long}"
