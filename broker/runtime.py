"""The broker's one runtime seam: what a service asks of the world it runs in.

One context object, ``Runtime``, holds it all: the clock (``now``), the waits (``sleep``),
where after-commit follow-ups go (``task_sink``; ``None``: Celery, see
``broker.services.records.tasks_bridge``), how a cluster's backend is built (``build_backend``;
``None``: the registry's own builders), the policy in force (``policy``; ``None``: the active
release), the armed failpoints (``failpoints``, see ``broker.failpoints``) and whether the Slurm
parsers refuse a field they do not know (``strict_slurm_fields``).  Services read
it through ``now()``, ``sleep()`` and ``current()``; nothing else in the broker keeps a
module-global, a swapped library function or a context variable for the same purpose.

A run that drives the broker in another world (the placement replay in simulated time, the
fault harness with its faulty clusters and its own task queue, a test of a slow cluster)
changes it for the length of a ``with`` block through the one mechanism, ``override``.  The
override is process-wide on purpose: a worker thread the harness starts inside the block (a
paused worker, an in-process ticker) sees the same clock and the same sink.  Blocks nest, and
each restores what was in force before it on the way out; they are meant to be entered by the
thread that drives the run.

Free of Django and of the rest of the broker, so every floor (backends included) may read it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timezone
from types import MappingProxyType
from typing import Any

# (cluster row, the builder in force before) -> Backend; typed loosely because this module
# sits below the backends and the models
BackendBuild = Callable[[Any, Callable[[Any], Any]], Any]
FailpointAction = Callable[[str], None]


def wall_now() -> datetime:
    """The wall clock, in UTC: what ``django.utils.timezone.now`` answers with USE_TZ on."""
    return datetime.now(timezone.utc)


@dataclasses.dataclass(frozen=True)
class Runtime:
    now: Callable[[], datetime] = wall_now
    sleep: Callable[[float], None] = time.sleep
    # called as sink(task_name, *args) after the commit, instead of queueing on Celery
    task_sink: Callable[..., object] | None = None
    build_backend: BackendBuild | None = None
    policy: Any = None  # a broker.services.fleet.policy.LoadedPolicy
    failpoints: Mapping[str, FailpointAction] = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    # the Slurm parsers on a field they do not know: True raises, False logs, None: as the
    # environment says (broker.backends.slurm.fields)
    strict_slurm_fields: bool | None = None


_current = Runtime()
_lock = threading.Lock()


def current() -> Runtime:
    """The runtime in force (one attribute read: cheap enough for every hot path)."""
    return _current


def now() -> datetime:
    """The broker's time: every service, selector and model default reads this."""
    return _current.now()


def sleep(seconds: float) -> None:
    """Every deliberate wait of the product: in simulated time it moves that clock instead."""
    _current.sleep(seconds)


@contextlib.contextmanager
def override(**changes: Any) -> Iterator[Runtime]:
    """Until the block ends the runtime has ``changes`` (fields of ``Runtime``) in force;
    then what was in force before comes back, whatever the block raised."""
    global _current
    with _lock:
        saved = _current
        _current = dataclasses.replace(saved, **changes)
        installed = _current
    try:
        yield installed
    finally:
        with _lock:
            _current = saved
