"""Whole numbers from query strings and form values: ASCII digits only.

``str.isdigit()`` says yes to '²' and other Unicode digits that ``int()`` then refuses (a 500)
or reads as a number nobody typed; every number a page or the API takes from a request goes
through ``whole_number`` instead."""

from __future__ import annotations

MAX_DIGITS = 18  # below 2**63: every integer column takes it


def whole_number(raw: object) -> int | None:
    """The value of ``raw`` when it is a string of 1-18 ASCII digits, else None."""
    if not isinstance(raw, str) or not 0 < len(raw) <= MAX_DIGITS or not raw.isascii() or not raw.isdigit():
        return None
    return int(raw)
