"""A job waiting in one destination's queue moves when another destination could start it now.

Sent to wait in a local queue (``queueing``), or sent where it fit and found the GPUs gone (a
local user took them between two inventory reports), a job keeps its place there; but when a
later report shows another cluster with room for the whole job now, waiting on is the worse
bet.  The broker then cancels it where it waits and, only after that destination confirms
the cancellation, releases its reservation and places it again (a cancel that is not
confirmed is tried on the next pass: placing first could run the job twice).  The cluster it
left stays eligible: it was only slower.

A job is looked at only once its destination has reported since it was sent there, so the
report that shows room elsewhere also shows the job waiting where it is; it moves only to a
cluster with nothing queued (free GPUs go to the jobs queued there first; the policy's
``aging.move_past_queue_after_s`` lifts that rule for a job that has waited that long), and at
most ``aging.max_moves`` times.
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from broker import runtime
from broker.models import AuditRecord, Workload, WorkloadState
from broker.models.workload import LocalReason
from broker.placement import Candidate, place_prepared
from broker.services.placing.bursting import burst_gate
from broker.services.placing.cycle import PlacingPass, placing_pass_prepare, workload_place
from broker.services.fleet.policy import current_policy
from broker.services.placing.withdraw import cancelled_there
from broker.services.quota.reservations import reservation_release
from broker.services.records import moves
from broker.services.records.transitions import Note
from broker.spec import validate_spec

# one pass moves at most this many (the rest wait for the next): each move is a cancel at
# one cluster and a dispatch to another
MOVES_PER_PASS = 50


def queued_moves(*, now: datetime | None = None) -> int:
    """Move every job waiting for capacity at its destination that another destination could
    start now, oldest first; how many moved."""
    now = now or runtime.now()
    waiting = list(
        Workload.objects.filter(
            state=WorkloadState.QUEUED,
            reason__in=(LocalReason.CAPACITY, LocalReason.GANG),  # waiting for GPUs to free
            origin="broker",
            cancel_requested_at__isnull=True,
            cluster__isnull=False,
        )
        .select_related("cluster", "tenant", "project", "gpu_class")
        .order_by("created_at", "id")
    )
    if not waiting or not current_policy().policy.aging.move_queued:
        return 0
    cycle = placing_pass_prepare(now=now)
    moved = 0
    for workload in waiting:
        if moved >= MOVES_PER_PASS:
            break
        target = fits_elsewhere(workload, cycle)
        if (
            target is not None
            and workload_move(workload_id=workload.id, to=target.cluster).state != WorkloadState.QUEUED
        ):
            moved += 1
            cycle.fleet.take(target)
    return moved


def fits_elsewhere(workload: Workload, cycle: PlacingPass) -> Candidate | None:
    """The best other destination where the whole job fits now, or None (also when its own
    destination has not reported since the job was sent there)."""
    cluster = workload.cluster
    assert cluster is not None
    seen = cluster.last_inventory_at
    if seen is None or workload.dispatched_at is None or seen <= workload.dispatched_at:
        return None
    spec = validate_spec(workload.spec)
    result = place_prepared(cycle.fleet, spec, **cycle.ask(workload, moving=True), holder=workload.uid)
    others = [
        c
        for c in result.ranked
        if c.cluster != cluster.name and c.cluster not in cycle.forced and _may_join(cycle, c.cluster, workload)
    ]
    if not others or moves_of(workload) >= cycle.fleet.policy.aging.max_moves:
        return None
    gate = burst_gate(
        workload=workload,
        ranked=others,
        fleet=cycle.fleet,
        spec=spec,
        now=cycle.now,
        estimator=cycle.estimator,
        crossed=cycle.tco_crossed,
    )
    return gate.ranked[0] if gate.ranked else None


def _may_join(cycle: PlacingPass, name: str, workload: Workload) -> bool:
    """A cluster with nothing queued; or, once the job has waited at its destination for the
    policy's ``move_past_queue_after_s``, any that reports room for it now: a job that long
    behind its own queue gives up little by joining another that may start it sooner."""
    if _queue_empty(cycle, name):
        return True
    after = cycle.fleet.policy.aging.move_past_queue_after_s
    sent = workload.dispatched_at
    return after is not None and sent is not None and (cycle.now - sent).total_seconds() >= after


def _queue_empty(cycle: PlacingPass, name: str) -> bool:
    """Free GPUs where jobs are queued go to those jobs first (the GPUs may be free only
    because the job at the head needs more): a job moved there would wait again."""
    snapshot = cycle.fleet.clusters[name].snapshot
    return snapshot is None or (snapshot.queue.pending_jobs <= 0 and snapshot.queue.pending_gpus <= 0)


def moves_of(workload: Workload) -> int:
    return AuditRecord.objects.filter(workload=workload, action="workload.moved").count()


def workload_move(*, workload_id: int, to: str) -> Workload:
    """Cancel at the destination; once confirmed, release and place again."""
    workload, confirmed = cancelled_there(
        workload_id=workload_id,
        retrying="move.retrying",
        message=lambda w, why: f"{to} could start it now; {why}: it stays queued at {_name(w)}",
    )
    if not confirmed:
        return workload
    if _moved(workload, f"waiting at {_name(workload)} while {to} could start it now"):
        return workload_place(workload_id=workload.id)
    return Workload.objects.get(id=workload.id)


def _name(workload: Workload) -> str:
    return workload.cluster.name if workload.cluster is not None else ""


@transaction.atomic
def _moved(workload: Workload, reason: str) -> bool:
    cluster = workload.cluster
    assert cluster is not None
    return bool(
        moves.move_elsewhere(
            pk=workload.id,
            fields={
                "reason": LocalReason.CAPACITY,
                "raw_reason": reason,
                "destination_job_id": "",
                "dispatched_at": None,
            },
            then=lambda: reservation_release(workload=workload, reason=reason),
            note=Note(
                action="workload.moved",
                workload=workload,
                cluster=cluster.name,
                destination_job_id=workload.destination_job_id,
                message=f"{reason}; the cancellation was confirmed, then the reservation released",
            ),
        )
    )
