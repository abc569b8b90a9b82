"""The audit trail: every decision and state change writes one record."""

from __future__ import annotations

from typing import Any

from broker.models import AuditRecord, Workload


def audit(
    *,
    action: str,
    workload: Workload | None = None,
    tenant_id: int | None = None,
    actor=None,
    message: str = "",
    policy_version: str = "",
    inputs: dict[str, Any] | None = None,
    cluster: str = "",
    score_breakdown: dict[str, Any] | None = None,
    destination_job_id: str = "",
) -> AuditRecord:
    if workload is not None and tenant_id is None:
        tenant_id = workload.tenant_id
    return AuditRecord.objects.create(
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
        .values_list("id", flat=True)
        .first()
    )
    if decision is None:
        return 0
    return AuditRecord.objects.filter(id=decision, destination_job_id="").update(destination_job_id=destination_job_id)
