"""Named failpoints: the places where a test may crash a service, marked in the service.

In the style of etcd's gofail: a service calls ``failpoint("dispatch.after_submit")`` at
each point where a crash would leave something half done (a row committed and the cluster
not yet called, a cluster that accepted and nothing recorded yet, ...).  In production
nothing is armed and the call is one dictionary look-up.  The fault tests and the fault
harness arm names through ``armed``; an armed action may raise (a simulated crash, a lost
reply) or block (a real worker paused there so a test can kill it).

The names are fixed and listed here, with where each sits; arming a name not listed is an
error, and a test checks that every listed name is called in the product (a crash point
reached by two paths, such as a reservation written alone or in a batch, has one call on
each) and that every call names a listed one.  This module imports nothing of the broker but its runtime
seam (``broker.runtime``, where the armed actions live), so any layer may mark its crash points.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType

from broker import runtime

# name -> where it sits (docs/design.md, "Failpoints", lists the same)
FAILPOINTS: Mapping[str, str] = {
    "dispatch.before_attempt_written": (
        "services/dispatching/send.py: the workload is dispatching; its attempt row is not written yet"
    ),
    "dispatch.after_attempt_written": (
        "services/dispatching/send.py: "
        "the attempt row is committed and every check passed; the cluster is not called yet"
    ),
    "dispatch.after_submit": (
        "services/dispatching/send.py: "
        "the cluster accepted the job; the broker has not recorded it (a crash, or a lost reply)"
    ),
    "dispatch.after_reject_released": (
        "services/dispatching/send.py: a rejection released the reservation; the workload is not placed again yet"
    ),
    "quota.after_reserve": (
        "services/quota/reservations.py: reservation rows are written; their transaction has not committed"
    ),
    "cancel.before_send": "services/following/cancel.py: the cancellation is stored; the cluster is not told yet",
    "cancel.after_send": "services/following/cancel.py: the cluster cancelled the job; the broker has not recorded it",
    "status.after_poll": (
        "services/following/status.py: the cluster answered a status poll; nothing of it is applied yet"
    ),
    "status.before_release": (
        "services/following/status.py: a job's end is written; its reservation is not released yet (same transaction)"
    ),
    "reconcile.before_lookup": (
        "services/following/reconcile.py: before looking up a due reservation's workload at its cluster"
    ),
    "reconcile.before_listing": "services/following/reconcile.py: before listing a cluster's jobs (the orphan search)",
    "reconcile.after_expire": (
        "services/following/reconcile.py: a reservation is expired; its workload is not yet sent back to placement"
    ),
    "multikueue.before_nominate": (
        "services/dispatching/multikueue_nominate.py: "
        "quota reserved and the nomination recorded; the manager not written yet"
    ),
    "multikueue.after_nominate": (
        "services/dispatching/multikueue_nominate.py: "
        "the manager's Workload carries the nomination; the record has not committed"
    ),
}

Action = Callable[[str], None]


class UnknownFailpoint(ValueError):
    """A name that is not in FAILPOINTS was armed."""


def failpoint(name: str) -> None:
    """A crash point: does nothing unless a test armed ``name``; then runs its action."""
    action = runtime.current().failpoints.get(name)
    if action is not None:
        action(name)


@contextlib.contextmanager
def armed(actions: Mapping[str, Action]) -> Iterator[None]:
    """Arm ``actions`` (failpoint name -> action called with the name) until the block ends.

    Every name must be listed in FAILPOINTS.  Blocks nest: the inner arming of a name wins
    while it lasts, and what was armed before comes back after it."""
    unknown = sorted(set(actions) - set(FAILPOINTS))
    if unknown:
        raise UnknownFailpoint(f"unknown failpoints {unknown}; known: {sorted(FAILPOINTS)}")
    with runtime.override(failpoints=MappingProxyType({**runtime.current().failpoints, **actions})):
        yield
