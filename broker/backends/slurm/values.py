"""Slurm's scalar spellings: "nothing" in its many forms, and numbers plain or wrapped."""

from __future__ import annotations

from typing import Any

NULLS = frozenset({"", "(null)", "N/A", "n/a", "None", "none", "Unknown", "UNKNOWN", "null"})


def clean(value: Any) -> str:
    """Text of a Slurm field, with Slurm's spellings of "nothing" turned into ""."""
    if value is None:
        return ""
    text = str(value).strip()
    return "" if text in NULLS else text


def number(value: Any, default: int = 0) -> int:
    """An integer from 5, "5", {"set": true, "number": 5} (v0.0.39+) or nothing."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return default
        value = value.get("number")
    if value is None or isinstance(value, bool):
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        text = clean(value)
        try:
            return int(float(text)) if text else default
        except ValueError:
            return default
