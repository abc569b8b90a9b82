"""Polling a real system until something holds, shared by the tests of real control planes."""

from __future__ import annotations

import time
from typing import Any, Callable


def wait_for(predicate: Callable[[], Any], timeout_s: float = 60, every: float = 0.5,
             what: str = "") -> Any:
    """Poll until ``predicate`` returns something truthy; fail saying what was awaited."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what or predicate}: {last!r}")
