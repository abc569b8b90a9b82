"""Months, the accounting period: a job is charged in the month its GPUs were released."""

from __future__ import annotations

import re
from datetime import date, datetime, timezone

from broker import runtime

_MONTH = re.compile(r"^(\d{4})-(\d{2})$")


def month_start(day: date | datetime) -> date:
    return date(day.year, day.month, 1)


def add_months(month: date, n: int) -> date:
    index = month.year * 12 + month.month - 1 + n
    return date(index // 12, index % 12 + 1, 1)


def month_bounds(month: date) -> tuple[datetime, datetime]:
    """[first instant, first instant of the next month) in UTC, as the ledger stores times."""
    start = month_start(month)
    stop = add_months(start, 1)
    return (
        datetime(start.year, start.month, 1, tzinfo=timezone.utc),
        datetime(stop.year, stop.month, 1, tzinfo=timezone.utc),
    )


def parse_month(text: str) -> date:
    """'2026-11' -> date(2026, 11, 1); ValueError otherwise."""
    match = _MONTH.match(text.strip())
    if not match or not 1 <= int(match.group(2)) <= 12:
        raise ValueError(f"expected a month as YYYY-MM, got {text!r}")
    return date(int(match.group(1)), int(match.group(2)), 1)


def this_month() -> date:
    return month_start(runtime.now())


def months_range(first: date, count: int) -> list[date]:
    return [add_months(month_start(first), i) for i in range(count)]
