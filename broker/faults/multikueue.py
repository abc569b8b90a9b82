"""Crash points of the MultiKueue dispatcher (``broker.services.dispatching.multikueue_nominate``).

Kept apart from ``points.CRASH_POINTS`` (the crash harness drives every one of those with
its own simulated fleet, which has no MultiKueue manager); armed by name on a ``FaultPlan``
like the others.  They fire at the failpoints ``multikueue.before_nominate`` and
``multikueue.after_nominate``, which sit on either side of the dispatcher's one write to
the manager.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from broker.faults.install import failpoint_hooks
from broker.faults.points import CrashPoint, FaultPlan

MULTIKUEUE_POINTS: tuple[CrashPoint, ...] = (
    CrashPoint(
        "multikueue_before_nominate",
        "multikueue.before_nominate",
        "crash",
        "the dispatcher reserved quota and recorded a nomination; it dies before writing it to the manager's Workload",
    ),
    CrashPoint(
        "multikueue_after_nominate",
        "multikueue.after_nominate",
        "crash",
        "the manager's Workload carries the nomination; the dispatcher dies before its own record commits",
    ),
)
MULTIKUEUE_POINTS_BY_NAME = {p.name: p for p in MULTIKUEUE_POINTS}


def arm(plan: FaultPlan, point: str, **kwargs) -> None:
    spec = MULTIKUEUE_POINTS_BY_NAME[point]
    plan.arm(point, hook=spec.hook, action=spec.action, **kwargs)


@contextlib.contextmanager
def multikueue_hooks(plan: FaultPlan) -> Iterator[None]:
    """The dispatcher's failpoints (every failpoint, in fact) fire the plan's hooks."""
    with failpoint_hooks(plan):
        yield
