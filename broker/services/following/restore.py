"""After a restore from a backup: dispatches the database cannot know about become unknown.

A backup is taken while the broker runs, and the broker goes on dispatching after it.  In the
restored database a workload that was ``reserved`` (placed, not yet sent) or ``dispatching``
has no destination job id, yet its job may be at the destination: the attempt that sent it was
made after the backup and is lost with everything else written since.  A first attempt does
not look the workload up before submitting (one read fewer per dispatch), so a broker started
on the restored database as it is would send that job a second time.

This pass, run once before the workers and the beat start (``manage.py after_restore``), gives
each such workload an attempt whose outcome is unknown, which is the truth after a restore.
From there the ordinary machinery applies: reconciliation looks the workload up at its
cluster and adopts the job it finds, a retried dispatch looks it up before sending, and only a
workload its cluster answers it does not have is sent (or placed again).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib.auth.models import User
from django.db import transaction

from broker.lifecycle import ON_THE_WAY_STATES
from broker.models import Workload, WorkloadState
from broker.services.dispatching.send import attempt_after
from broker.services.records import moves
from broker.services.records.audit import audit
from broker import runtime

UNKNOWN_AFTER_RESTORE = "restored from a backup: a dispatch after the backup may have reached the cluster"


@dataclass
class RestoreReport:
    marked: list[str] = field(default_factory=list)  # uids of the workloads now looked up before any send


def workloads_mark_restored(*, actor: User | None = None) -> RestoreReport:
    """Every workload on its way to a cluster without a job id gets an unknown attempt there."""
    report = RestoreReport()
    on_the_way = Workload.objects.filter(state__in=ON_THE_WAY_STATES, destination_job_id="").order_by("id")
    for workload_id in list(on_the_way.values_list("id", flat=True)):
        uid = _mark_unknown(workload_id=workload_id, actor=actor)
        if uid:
            report.marked.append(uid)
    return report


@transaction.atomic
def _mark_unknown(*, workload_id: int, actor: User | None) -> str:
    """One workload: to ``dispatching`` (so reconciliation looks it up rather than expiring its
    reservation and placing it again, perhaps elsewhere) with an attempt of unknown outcome."""
    workload = Workload.objects.select_for_update(of=("self",)).select_related("cluster").get(id=workload_id)
    if workload.state not in ON_THE_WAY_STATES or workload.destination_job_id:
        return ""  # moved on since the pass read it
    if workload.state == WorkloadState.RESERVED:
        moves.start_dispatch(pk=workload.id, note=None, savepoint=False)
    attempt = attempt_after(workload, workload.attempts.order_by("-number").first())
    attempt.save(force_insert=True)
    moves.attempt_no_answer(
        pk=attempt.id,
        note=None,
        fields={"error": UNKNOWN_AFTER_RESTORE, "finished_at": runtime.now()},
        savepoint=False,
    )
    audit(
        action="dispatch.restored_unknown",
        workload=workload,
        actor=actor,
        cluster=workload.placed_cluster.name,
        message="restored from a backup: looked up at the cluster before anything is sent again",
    )
    return workload.uid
