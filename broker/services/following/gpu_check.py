"""A job whose pre-flight GPU check failed (``broker.preflight``): started by its scheduler, its
GPUs did not work on one worker's node, and the whole gang's attempt ended there.

The workload goes back to placement for a new job (its reservation released, the next pass
reserves again), that job is charged to nobody (``usage_waive``), and the node is blocked:
one escalation per node, a repeat folded into it (its count of failures and the block's end
moved on), until the block expires or an admin resolves the escalation
(``broker.selectors.node_blocks``), so placement puts nothing there meanwhile."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction

from accounting.services.usage import usage_waive
from broker import preflight, runtime
from broker.backends.base import DestinationJob, JobState
from broker.lifecycle import UNRESOLVED_ESCALATION_STATES
from broker.models import Cluster, Escalation, EscalationKind, Workload
from broker.services.following.escalations import escalation_open
from broker.services.quota.reservations import reservation_release
from broker.services.records import moves
from broker.services.records.audit import audit
from broker.services.records.transitions import Note


def failed_check(job: DestinationJob) -> tuple[str, str] | None:
    """(worker, node) where the ended job's pre-flight check failed; None for any other end."""
    outcome = job.outcome
    if job.state is not JobState.FAILED or outcome is None or outcome.end_reason != preflight.END_REASON:
        return None
    found = preflight.failed_worker(outcome.summary)
    return (found[0], found[1]) if found else None


def workload_gpu_check_failed(*, workload: Workload, fields: dict[str, str], worker: str, node: str) -> int:
    """Place the workload again, not charged for this job, and block the node."""
    cluster = workload.placed_cluster
    job_id = workload.destination_job_id
    said = preflight.summary(worker, node)
    message = f"{said} at {cluster.name}: placed again, not on {node}; this attempt is not charged"
    written: dict[str, object] = {**fields, "raw_reason": message, "destination_job_id": "", "dispatched_at": None}
    moved = moves.requeue_gpu_check(
        pk=workload.id,
        fields=written,
        then=lambda: reservation_release(workload=workload, reason=message),
        note=Note(
            action="workload.gpu_check_failed",
            workload=workload,
            cluster=cluster.name,
            destination_job_id=job_id,
            message=message,
        ),
    )
    if moved:
        usage_waive(cluster=cluster, job_id=job_id, reason=message)
        node_block(cluster=cluster, node=node, reason=said, workload=workload, job_id=job_id)
    return moved


@transaction.atomic
def node_block(*, cluster: Cluster, node: str, reason: str, workload: Workload | None, job_id: str) -> Escalation:
    """Block ``node`` for ``GPUBROKER_GPU_CHECK_BLOCK_S`` from now: its escalation opened, or
    the open one counting one failure more with its block started again."""
    now = runtime.now().replace(microsecond=0)
    until = (now + timedelta(seconds=settings.GPUBROKER_GPU_CHECK_BLOCK_S)).isoformat()
    key = f"gpu-check:{cluster.name}:{node}"
    last = {"workload": workload.uid if workload else "", "job": job_id, "at": now.isoformat()}
    open_one = Escalation.objects.select_for_update().filter(key=key, state__in=UNRESOLVED_ESCALATION_STATES).first()
    if open_one is None:
        evidence = {"node": node, "reason": reason, "failures": 1, "blocked_until": until, "last": last}
        return escalation_open(
            kind=EscalationKind.GPU_CHECK,
            key=key,
            cluster=cluster,
            workload=workload,
            destination_job_id=job_id,
            evidence=evidence,
        )
    failures = int((open_one.evidence or {}).get("failures", 1)) + 1
    open_one.evidence = {
        **(open_one.evidence or {}),
        "reason": reason,
        "failures": failures,
        "blocked_until": until,
        "last": last,
    }
    open_one.last_seen_at = now
    open_one.save(update_fields=["evidence", "last_seen_at"])
    audit(
        action="escalation.seen_again",
        workload=workload,
        tenant_id=workload.tenant_id if workload else None,
        cluster=cluster.name,
        destination_job_id=job_id,
        message=f"{reason}: failure {failures} on {node}, blocked until {until}",
    )
    return open_one
