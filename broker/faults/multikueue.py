"""Named failpoints of the MultiKueue dispatcher (``broker.services.multikueue_nominate``).

Kept apart from ``points.CRASH_POINTS`` (the crash harness drives every one of those with
its own simulated fleet, which has no MultiKueue manager); armed by name on a ``FaultPlan``
like the others, with ``multikueue_hooks`` installed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from broker.faults.points import CrashPoint, FaultPlan

MULTIKUEUE_POINTS: tuple[CrashPoint, ...] = (
    CrashPoint(
        "multikueue_before_nominate",
        "multikueue:nominate",
        "crash",
        "the dispatcher reserved quota and recorded a nomination; it dies before writing it to the manager's Workload",
    ),
    CrashPoint(
        "multikueue_after_nominate",
        "multikueue:nominated",
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
    """Fire ``multikueue:nominate`` before and ``multikueue:nominated`` after the one write
    the dispatcher makes to the manager."""
    from broker.services import multikueue_nominate as nom

    saved = nom.write_nomination

    def hooked(client, wl, workers):
        plan.fire("multikueue:nominate", cluster=",".join(workers))
        written = saved(client, wl, workers)
        if written:
            plan.fire("multikueue:nominated", cluster=",".join(workers))
        return written

    nom.write_nomination = hooked
    try:
        yield
    finally:
        nom.write_nomination = saved
