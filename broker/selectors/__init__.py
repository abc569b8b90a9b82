"""Reads of broker data, scoped to the acting user, one module per flow."""
