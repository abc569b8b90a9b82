"""A policy hold at the destination is not capacity: withdraw the job and place it elsewhere.

A job that its destination keeps pending for a local *policy* reason (QoS or association
limit, a Kueue quota it exceeds) will not start by waiting, and meanwhile it holds the
tenant's global quota.  Once it has been held longer than the policy's
``policy_hold_withdraw_s``, the broker cancels it there, and only after the destination
confirms the cancellation releases the reservation and places the workload again without
that cluster (a cancel that is not confirmed is retried on the next pass: releasing first
could run the job twice).
"""

from __future__ import annotations

from datetime import datetime
from typing import Callable

from django.db import transaction

from broker.backends.base import Unavailable
from broker.backends.registry import backend_for
from broker.models import AuditRecord, Workload, WorkloadState
from broker.models.workload import LocalReason
from broker.placement.record import PlacementRecord
from broker.services.records import moves
from broker.services.records.audit import audit
from broker.services.notifying.deliveries import notify_on_commit
from broker.services.fleet.policy import current_policy
from broker.services.quota.reservations import reservation_release
from broker.services.records.transitions import Note
from broker import runtime
from broker.services.placing.cycle import workload_place


def policy_held_since(workload: Workload) -> datetime | None:
    """When the destination began holding the job for its current policy reason: the
    status poll records each change of the local reason as ``workload.waiting``."""
    record = (
        AuditRecord.objects.filter(workload=workload, action="workload.waiting")
        .order_by("-created_at", "-id")
        .values_list("created_at", "message")
        .first()
    )
    if record is None or not record[1].startswith(f"{LocalReason.POLICY}:"):
        return None
    since: datetime = record[0]
    return since


def policy_holds_withdraw(*, now: datetime | None = None) -> int:
    """Withdraw every queued workload held by a local policy past the limit; how many moved."""
    now = now or runtime.now()
    limit = current_policy().policy.policy_hold_withdraw_s
    if limit <= 0:
        return 0
    moved = 0
    for workload in Workload.objects.filter(
        state=WorkloadState.QUEUED, reason=LocalReason.POLICY, cancel_requested_at__isnull=True
    ).select_related("cluster"):
        since = policy_held_since(workload)
        if since is not None and (now - since).total_seconds() >= limit:
            moved += (
                workload_withdraw(workload_id=workload.id, held_s=(now - since).total_seconds()).state
                != WorkloadState.QUEUED
            )
    return moved


def cancelled_there(
    *,
    workload_id: int,
    retrying: str,
    message: Callable[[Workload, str], str],
    state: str = WorkloadState.QUEUED,
) -> tuple[Workload, bool]:
    """Cancel the job of a workload in ``state`` (queued, or running for a preemption) at its
    destination: the workload, and whether the destination confirmed it (no longer in that
    state: nothing done; not confirmed: audited as ``retrying`` with ``message(workload,
    why)``, tried again on the next pass)."""
    workload = Workload.objects.select_related("cluster").get(id=workload_id)
    if workload.state != state or workload.cluster is None:
        return workload, False
    job_id = workload.destination_job_id
    try:
        if bool(job_id) and backend_for(workload.cluster).cancel(job_id):
            return workload, True
        why = "the destination has not confirmed the cancellation yet"
    except Unavailable as exc:
        why = str(exc)
    audit(
        action=retrying,
        workload=workload,
        cluster=workload.cluster.name,
        destination_job_id=job_id,
        message=message(workload, why),
    )
    return workload, False


def workload_withdraw(*, workload_id: int, held_s: float) -> Workload:
    """Cancel at the destination; once confirmed, release and place elsewhere."""
    workload, confirmed = cancelled_there(
        workload_id=workload_id,
        retrying="withdraw.retrying",
        message=lambda w, why: f"held by local policy ({w.raw_reason}); {why}: the reservation is kept",
    )
    if not confirmed:
        return workload
    assert workload.cluster is not None
    reason = (
        f"withdrawn after {held_s / 60:.0f} min held by local policy at {workload.cluster.name} "
        f"({workload.raw_reason or 'policy'})"
    )
    if _withdrawn(workload, reason):
        return workload_place(workload_id=workload.id)
    return Workload.objects.get(id=workload.id)


@transaction.atomic
def _withdrawn(workload: Workload, reason: str) -> bool:
    cluster = workload.cluster
    assert cluster is not None
    placement = PlacementRecord.from_json(workload.placement).rejected_by(cluster.name, reason).to_json()
    moved = moves.withdraw(
        pk=workload.id,
        fields={
            "tried_clusters": sorted(set(workload.tried_clusters) | {cluster.name}),
            "placement": placement,
            "reason": LocalReason.POLICY,
            "raw_reason": reason,
            "destination_job_id": "",
            "dispatched_at": None,
        },
        then=lambda: reservation_release(workload=workload, reason=reason),
        note=Note(
            action="workload.withdrawn",
            workload=workload,
            cluster=cluster.name,
            destination_job_id=workload.destination_job_id,
            message=f"{reason}; the cancellation was confirmed, then the reservation released",
        ),
    )
    if moved:
        notify_on_commit(workload_id=workload.id, event="withdrawn")
    return bool(moved)
