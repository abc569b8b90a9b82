"""Follow jobs at their destination: state, local queue reason, end.

A cluster that does not answer becomes stale: its jobs are left exactly as
they were (neither released nor charged as ended) until it answers again.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime

from django.db import transaction
from django.db.models import F

from broker.backends.base import DestinationJob, JobState, Unavailable
from broker.backends.registry import backend_for
from broker.failpoints import failpoint
from broker.lifecycle import FOLLOWED_STATES
from broker.models import Cluster, EscalationKind, Workload, WorkloadState
from broker.services.records import moves
from broker.services.records.audit import audit
from broker.services.notifying.deliveries import ENDED_EVENTS, notify_on_commit
from broker.services.following.escalations import escalation_open
from broker.services.following.gpu_check import failed_check, workload_gpu_check_failed
from broker.services.fleet.inventory import cluster_mark_stale
from broker.services.quota.reservations import reservation_release
from broker.services.records.transitions import Note
from broker import runtime

_ENDED = {
    JobState.COMPLETED: WorkloadState.COMPLETED,
    JobState.FAILED: WorkloadState.FAILED,
    JobState.CANCELLED: WorkloadState.CANCELLED,
    # a job preempted while its cancel was on the way: it ended as its user asked
    JobState.PREEMPTED: WorkloadState.CANCELLED,
}


def cluster_poll_status(*, cluster_id: int) -> int:
    """Refresh every followed workload on one cluster; returns how many changed."""
    cluster = Cluster.objects.get(id=cluster_id)
    # MultiKueue workloads are followed on their manager (broker.services.dispatching.multikueue)
    workloads = list(
        Workload.objects.filter(cluster=cluster, state__in=FOLLOWED_STATES, origin="broker").exclude(
            destination_job_id=""
        )
    )
    if not workloads:
        return 0
    try:
        jobs = backend_for(cluster).status([w.destination_job_id for w in workloads])
    except Unavailable as exc:
        cluster_mark_stale(cluster=cluster, error=str(exc))
        return 0
    failpoint("status.after_poll")
    changed = 0
    for workload in workloads:
        job = jobs.get(workload.destination_job_id)
        if job is None:
            _missing(cluster, workload)
        else:
            changed += workload_apply_status(workload=workload, job=job)
    return changed


def _missing(cluster: Cluster, workload: Workload) -> None:
    """The cluster answered but no longer reports this job: unclear, never auto-released."""
    escalation_open(
        kind=EscalationKind.LOST_JOB,
        key=f"lost:{cluster.name}:{workload.destination_job_id}",
        cluster=cluster,
        workload=workload,
        destination_job_id=workload.destination_job_id,
        gpus=workload.total_gpus,
        evidence={
            "workload": workload.uid,
            "last_state": workload.state,
            "seen_missing_at": runtime.now().isoformat(),
        },
    )


def outcome_of(job: DestinationJob) -> dict[str, object]:
    """What the workload keeps of how its job ended (empty: the backend could not tell)."""
    return {} if job.outcome is None else dataclasses.asdict(job.outcome)


def _not_before(when: datetime | None, floor: datetime) -> datetime | None:
    """A cluster's clock may run behind ours: nothing starts before it was created here."""
    return None if when is None else max(when, floor)


def _release_ended(workload: Workload, new_state: str) -> None:
    failpoint("status.before_release")
    reservation_release(workload=workload, reason=f"job ended at destination: {new_state}")


@transaction.atomic
def workload_apply_status(*, workload: Workload, job: DestinationJob) -> int:
    now = runtime.now()
    live = Workload.objects.filter(id=workload.id, state__in=FOLLOWED_STATES)
    fields = {
        "reason": job.reason.value,
        "raw_reason": job.raw_reason[:4000],
        "worker_cluster": job.worker_cluster or workload.worker_cluster,
    }
    started = workload.started_at or _not_before(job.started_at, workload.created_at)
    if job.state is JobState.PREEMPTED and workload.state != WorkloadState.CANCELLING:
        return _preempted(workload, job, fields, requeued_there=False)
    if job.state is JobState.PENDING and workload.state == WorkloadState.RUNNING:
        return _preempted(workload, job, fields, requeued_there=True)
    check = failed_check(job) if workload.state != WorkloadState.CANCELLING else None
    if check is not None:  # its GPUs failed the job's own check: placed again, not charged
        return workload_gpu_check_failed(workload=workload, fields=fields, worker=check[0], node=check[1])
    if job.state in _ENDED:
        new_state = _ENDED[job.state]
        ended = _not_before(job.ended_at or now, started or workload.created_at)
        if not moves.ended(
            pk=workload.id,
            to=new_state,
            then=lambda: _release_ended(workload, new_state),
            note=Note(
                action=f"workload.{new_state}",
                workload=workload,
                cluster=workload.placed_cluster.name,
                destination_job_id=workload.destination_job_id,
                message=job.raw_reason,
            ),
            fields=dict(ended_at=ended, started_at=started, run_seconds=job.run_s, outcome=outcome_of(job), **fields),
        ):
            return 0
        notify_on_commit(workload_id=workload.id, event=ENDED_EVENTS.get(new_state, "ended"))
        return 1
    if job.state == JobState.RUNNING and workload.state == WorkloadState.QUEUED:
        if moves.started(
            pk=workload.id,
            fields={"started_at": started or now, **fields},
            note=Note(
                action="workload.running",
                workload=workload,
                cluster=workload.placed_cluster.name,
                destination_job_id=workload.destination_job_id,
                message=f"on {', '.join(job.nodes)}" if job.nodes else "",
            ),
        ):
            notify_on_commit(workload_id=workload.id, event="started")
            return 1
    if (workload.reason, workload.raw_reason) != (fields["reason"], fields["raw_reason"]):
        live.update(**fields)
        if job.state == JobState.PENDING and job.raw_reason:
            audit(
                action="workload.waiting",
                workload=workload,
                cluster=workload.placed_cluster.name,
                message=f"{job.reason.value}: {job.raw_reason}",
            )
        return 1
    return 0


def _preempted(workload: Workload, job: DestinationJob, fields: dict[str, str], *, requeued_there: bool) -> int:
    """Preempted at its destination. ``requeued_there``: the destination queued the same job
    again (Kueue's eviction, a Slurm requeue): the workload is queued there and keeps its
    reservation, as the destination still holds the job. Otherwise the job has ended (Slurm's
    PreemptMode=CANCEL), charged as that job's: the workload goes back to placement for a new
    job, its reservation released (the next pass reserves again)."""
    said = (job.outcome.summary if job.outcome else "") or job.raw_reason or job.reason.value
    message = f"preempted at {workload.placed_cluster.name} ({said}): "
    message += "queued again there" if requeued_there else "placed again"
    written: dict[str, object] = {**fields, "preemptions": F("preemptions") + 1}
    if not requeued_there:  # the job is gone: the next one is another
        written.update(raw_reason=message, destination_job_id="", dispatched_at=None)
    moved = (moves.requeued_there if requeued_there else moves.requeue_preempted)(
        pk=workload.id,
        fields=written,
        then=None if requeued_there else lambda: reservation_release(workload=workload, reason=message),
        note=Note(
            action="workload.preempted",
            workload=workload,
            cluster=workload.placed_cluster.name,
            destination_job_id=workload.destination_job_id,
            message=message,
        ),
    )
    if moved:
        notify_on_commit(workload_id=workload.id, event="preempted")
    return moved
