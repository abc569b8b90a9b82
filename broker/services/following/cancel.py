"""Propagate a stored cancellation to the destination until it confirms."""

from __future__ import annotations

from django.db import transaction

from broker.backends.base import Backend
from broker.backends.base import Unavailable
from broker.backends.registry import backend_for
from broker.failpoints import failpoint
from broker.models import Workload, WorkloadState
from broker.services.records import moves
from broker.services.records.audit import audit, audit_link_destination
from broker.services.dispatching.send import attempt_in_flight
from broker.services.quota.reservations import reservation_release
from broker.services.records.transitions import Note
from broker import runtime


def cancel_propagate(*, workload_id: int) -> Workload:
    workload = Workload.objects.select_related("cluster").get(id=workload_id)
    if workload.state != WorkloadState.CANCELLING:
        return workload
    try:
        backend = backend_for(workload.cluster)  # a backend that can't be built: retried later
        job_id = workload.destination_job_id or _look_up(workload, backend)
        if job_id is None:
            return workload  # a dispatch may still be in flight: try again later
        failpoint("cancel.before_send")
        confirmed = bool(job_id) and backend.cancel(job_id)
        failpoint("cancel.after_send")
    except Unavailable as exc:
        audit(
            action="cancel.retrying",
            workload=workload,
            cluster=workload.placed_cluster.name,
            message=f"destination did not confirm ({exc}); will retry",
        )
        return workload
    if job_id and not confirmed:
        return workload
    return _cancelled(workload, job_id)


def _look_up(workload: Workload, backend: Backend) -> str | None:
    """'' when the destination holds nothing for it; None when that can't be known yet."""
    if attempt_in_flight(workload):
        return None
    found = backend.find(workload.uid)
    if found is None:
        return ""
    if Workload.objects.filter(id=workload.id, destination_job_id="").update(destination_job_id=found.job_id):
        audit_link_destination(workload=workload, cluster=workload.placed_cluster.name, destination_job_id=found.job_id)
    return found.job_id


@transaction.atomic
def _cancelled(workload: Workload, job_id: str) -> Workload:
    moves.cancel_confirmed(
        pk=workload.id,
        fields={"ended_at": runtime.now()},
        then=lambda: reservation_release(workload=workload, reason="cancelled"),
        note=Note(
            action="workload.cancelled",
            workload=workload,
            cluster=workload.placed_cluster.name,
            destination_job_id=job_id,
            message="destination confirmed the cancellation" if job_id else "nothing had reached the destination",
        ),
    )
    return Workload.objects.get(id=workload.id)
