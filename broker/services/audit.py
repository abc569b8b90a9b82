"""The audit trail: every decision and state change writes one record."""
from __future__ import annotations

from typing import Any

from broker.models import AuditRecord, Workload


def audit(
    *, action: str, workload: Workload | None = None, tenant_id: int | None = None, actor=None,
    message: str = "", policy_version: str = "", inputs: dict[str, Any] | None = None,
    cluster: str = "", score_breakdown: dict[str, Any] | None = None, destination_job_id: str = "",
) -> AuditRecord:
    if workload is not None and tenant_id is None:
        tenant_id = workload.tenant_id
    return AuditRecord.objects.create(
        workload=workload, tenant_id=tenant_id, actor=actor if getattr(actor, "pk", None) else None,
        action=action, message=message, policy_version=policy_version or (workload.policy_version if workload else ""),
        inputs=inputs or {}, cluster=cluster, score_breakdown=score_breakdown or {},
        destination_job_id=destination_job_id,
    )
