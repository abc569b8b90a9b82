"""The wait seam, beside the clock seam (``broker.clock``): every deliberate wait in the
product goes through ``sleep`` here, so a run in simulated time can make a wait move its
own clock instead of the wall clock's.  Free of Django, so backends may use it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

_sleep: Callable[[float], None] = time.sleep


def sleep(seconds: float) -> None:
    _sleep(seconds)


@contextlib.contextmanager
def sleep_override(sleeper: Callable[[float], None]) -> Iterator[None]:
    global _sleep
    saved, _sleep = _sleep, sleeper
    try:
        yield
    finally:
        _sleep = saved
