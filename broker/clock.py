"""The broker's clock seam.

Services read time through ``django.utils.timezone.now`` (their ``now=`` parameters default
to it, and so do ``auto_now`` fields).  Runs that drive the broker in simulated time (the
placement replay, the fault harness, the tests of slow clusters) swap that one function
here, for the length of a ``with`` block, instead of each patching it their own way; with
``sleep``, the waits of ``broker.wait`` (a slow simulated cluster's) move that clock too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from datetime import datetime

from django.utils import timezone

from broker.wait import sleep_override


@contextlib.contextmanager
def clock_override(now: Callable[[], datetime], sleep: Callable[[float], None] | None = None) -> Iterator[None]:
    """Every ``timezone.now()`` in this process reads ``now`` until the block ends; with
    ``sleep``, every wait through ``broker.wait`` calls it (it should move ``now`` along)."""
    saved = timezone.now
    timezone.now = now  # the seam: one function, restored below
    try:
        if sleep is None:
            yield
        else:
            with sleep_override(sleep):
                yield
    finally:
        timezone.now = saved
