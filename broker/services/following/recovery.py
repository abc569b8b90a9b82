"""Recovery of a run lost with its cluster: resubmit from checkpoint, only when safe."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction

from broker.lifecycle import AT_DESTINATION_STATES
from broker.models import Workload
from broker.models.workload import LocalReason
from broker.services.records import moves
from broker.services.records.audit import audit
from broker.services.notifying.deliveries import notify_on_commit
from broker.services.quota.reservations import reservation_release
from broker.services.records.transitions import Note
from broker import runtime
from broker.services.submitting.workloads import _create


def workload_declare_dead(*, workload_id: int, actor: User, why: str) -> Workload | None:
    """The old run is known dead: end it, and resubmit from checkpoint if the spec allows.

    Returns the resubmitted workload, or None."""
    with transaction.atomic():
        workload = Workload.objects.select_related("project").get(id=workload_id)
        if not moves.declare_dead(
            pk=workload_id,
            from_=AT_DESTINATION_STATES,
            actor=actor,
            fields={"ended_at": runtime.now(), "reason": LocalReason.OTHER, "raw_reason": f"declared dead: {why}"},
            then=lambda: reservation_release(workload=workload, reason="old run declared dead by an admin"),
            note=Note(action="workload.declared_dead", workload=workload, message=why),
        ):
            return None
        notify_on_commit(workload_id=workload_id, event="failed")  # its submitter hears of it
    if not workload.spec.get("checkpointable"):
        return None
    return workload_resubmit(workload=workload, actor=actor)


def workload_resubmit(*, workload: Workload, actor: User) -> Workload:

    spec = dict(workload.spec)
    spec.pop("project", None)
    new = _create(user=workload.submitted_by, project=workload.project, spec_data=spec, resubmit_of=workload)
    audit(
        action="workload.resubmitted",
        workload=workload,
        actor=actor,
        message=f"resubmitted from checkpoint as {new.uid}",
    )
    return new
