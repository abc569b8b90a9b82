"""The audit trail: every decision and state change writes one record."""

from __future__ import annotations

from typing import Mapping

from django.contrib.auth.models import User
from django.db.models import Subquery

from broker.models import AuditRecord, Workload


def audit(
    *,
    action: str,
    workload: Workload | None = None,
    tenant_id: int | None = None,
    actor: User | None = None,
    message: str = "",
    policy_version: str = "",
    inputs: Mapping[str, object] | None = None,
    cluster: str = "",
    score_breakdown: Mapping[str, object] | None = None,
    destination_job_id: str = "",
) -> AuditRecord:
    record = audit_record(
        action=action,
        workload=workload,
        tenant_id=tenant_id,
        actor=actor,
        message=message,
        policy_version=policy_version,
        inputs=inputs,
        cluster=cluster,
        score_breakdown=score_breakdown,
        destination_job_id=destination_job_id,
    )
    record.save(force_insert=True)
    return record


def audit_many(records: list[AuditRecord]) -> None:
    """Store records built with ``audit_record`` in one statement (a placement pass's chunk)."""
    AuditRecord.objects.bulk_create(records)


def audit_record(
    *,
    action: str,
    workload: Workload | None = None,
    tenant_id: int | None = None,
    actor: User | None = None,
    message: str = "",
    policy_version: str = "",
    inputs: Mapping[str, object] | None = None,
    cluster: str = "",
    score_breakdown: Mapping[str, object] | None = None,
    destination_job_id: str = "",
) -> AuditRecord:
    """The record ``audit`` writes, not saved yet."""
    if workload is not None and tenant_id is None:
        tenant_id = workload.tenant_id
    return AuditRecord(
        workload=workload,
        tenant_id=tenant_id,
        actor=actor if getattr(actor, "pk", None) else None,
        action=action,
        message=message,
        policy_version=policy_version or (workload.policy_version if workload else ""),
        inputs=inputs or {},
        cluster=cluster,
        score_breakdown=score_breakdown or {},
        destination_job_id=destination_job_id,
    )


def audit_link_destination(*, workload: Workload, cluster: str, destination_job_id: str) -> int:
    """Write the destination job id onto the placement decision that sent the workload there.

    The decision is recorded before dispatch, when no job id exists yet; filling in that one
    blank field later (never changing anything else) lets the timeline show, on the decision
    itself, which job it became.  Returns how many records were completed (0 or 1)."""
    decision = (
        AuditRecord.objects.filter(
            workload=workload, action="placement.decided", cluster=cluster, destination_job_id=""
        )
        .order_by("-created_at", "-id")
        .values("id")[:1]
    )
    # one statement (the newest blank decision found and completed together): dispatch runs it per job
    return AuditRecord.objects.filter(id=Subquery(decision), destination_job_id="").update(
        destination_job_id=destination_job_id
    )
