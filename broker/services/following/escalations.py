"""Escalations: allocations nobody can explain, kept until an admin decides."""

from __future__ import annotations

from typing import Mapping

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from broker.models import Cluster, Escalation, EscalationKind, EscalationState, Workload
from broker.selectors.workloads import escalation_get
from broker.services.records import moves
from broker.services.records.audit import audit
from broker.services.records.transitions import Note
from broker import runtime
from broker.services.following.recovery import workload_declare_dead


def escalation_open(
    *,
    kind: str,
    key: str,
    cluster: Cluster,
    evidence: Mapping[str, object],
    workload: Workload | None = None,
    tenant_id: int | None = None,
    destination_job_id: str = "",
    gpus: int = 0,
) -> Escalation:
    """Open one escalation per problem; seeing it again only refreshes last_seen_at."""
    now = runtime.now()
    existing = Escalation.objects.filter(key=key).exclude(state=EscalationState.RESOLVED).first()
    if existing is not None:
        Escalation.objects.filter(id=existing.id).update(last_seen_at=now)
        return existing
    try:
        with transaction.atomic():
            esc = Escalation.objects.create(
                kind=kind,
                key=key,
                cluster=cluster,
                workload=workload,
                tenant_id=tenant_id or (workload.tenant_id if workload else None),
                destination_job_id=destination_job_id,
                gpus=gpus,
                evidence=evidence,
            )
            audit(
                action="escalation.opened",
                workload=workload,
                tenant_id=esc.tenant_id,
                cluster=cluster.name,
                destination_job_id=destination_job_id,
                message=f"{esc.get_kind_display()}: {key}",
                inputs=evidence,
            )
            return esc
    except IntegrityError:
        return Escalation.objects.filter(key=key).exclude(state=EscalationState.RESOLVED).get()


@transaction.atomic
def escalation_acknowledge(*, user: User, escalation_id: int) -> Escalation:
    esc = escalation_get(user=user, escalation_id=escalation_id)
    moves.escalation_acknowledge(
        pk=esc.id,
        actor=user,
        fields={"acknowledged_by": user},
        note=Note(
            action="escalation.acknowledged",
            workload=esc.workload,
            tenant_id=esc.tenant_id,
            cluster=esc.cluster.name,
            message=esc.key,
        ),
    )
    esc.refresh_from_db()
    return esc


def escalation_resolve(*, user: User, escalation_id: int, outcome: str, old_run_dead: bool = False) -> Escalation:
    """Record the admin's decision.  For a lost job, ``old_run_dead`` says the old run is
    known to be gone: its reservation is released and, when the spec allows it, the
    workload is resubmitted from its checkpoint."""
    if not outcome.strip():
        raise ValueError("outcome: say what was found and done")
    esc = escalation_get(user=user, escalation_id=escalation_id)
    with transaction.atomic():
        if not moves.escalation_resolve(
            pk=esc.id,
            actor=user,
            fields={"resolved_by": user, "resolved_at": runtime.now(), "outcome": outcome.strip()},
            note=Note(
                action="escalation.resolved",
                workload=esc.workload,
                tenant_id=esc.tenant_id,
                cluster=esc.cluster.name,
                message=outcome.strip(),
                inputs={"old_run_dead": old_run_dead},
            ),
        ):
            return esc
    if old_run_dead and esc.kind == EscalationKind.LOST_JOB and esc.workload_id:
        workload_declare_dead(workload_id=esc.workload_id, actor=user, why=outcome.strip())
    esc.refresh_from_db()
    return esc
