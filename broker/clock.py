"""The broker's clock seam.

Services read time through ``django.utils.timezone.now`` (their ``now=`` parameters default
to it, and so do ``auto_now`` fields).  Runs that drive the broker in simulated time (the
placement replay, the fault harness) swap that one function here, for the length of a
``with`` block, instead of each patching it their own way.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from datetime import datetime

from django.utils import timezone


@contextlib.contextmanager
def clock_override(now: Callable[[], datetime]) -> Iterator[None]:
    """Every ``timezone.now()`` in this process reads ``now`` until the block ends."""
    saved = timezone.now
    timezone.now = now  # the seam: one function, restored below
    try:
        yield
    finally:
        timezone.now = saved
