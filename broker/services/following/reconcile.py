"""Reconciliation: the periodic (and start-up) pass that keeps the broker honest.

Reconcile decides, tasks act.  The pass makes its own writes (it marks silent clusters
stale, expires reservations nobody acknowledged after looking the workload up, confirms
the acknowledged, adopting a job its look-up found, releases the reservations of ended
workloads, escalates what nobody can explain) and enqueues the dispatches and
cancellations whose outcome is unknown as tasks,
sent after its commit.  So one pass calls each cluster at most once (the listing of its
jobs), plus one look-up per due reservation; it skips stale clusters (no listing, no
dispatch; cancellations are still enqueued, to be retried until confirmed), enqueues at most
``max_follow_ups`` follow-ups, stops when ``budget_s`` (read on the clock seam) is spent,
and records its run either way, with what it left for the next pass.  It never releases an
unclear allocation by itself.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Callable, ParamSpec, TypeVar


from broker.backends.base import DestinationJob, Unavailable
from broker.backends.registry import backend_for
from broker.failpoints import failpoint
from broker.models import (
    Cluster,
    ClusterHealth,
    EscalationKind,
    ReconcileRun,
    Reservation,
    ReservationState,
    Workload,
    WorkloadState,
)
from broker.lifecycle import LIVE_RESERVATION_STATES, ON_THE_WAY_STATES, TERMINAL_STATES
from broker.models.workload import LocalReason
from broker.services.records import moves
from broker.services.records import tasks_bridge
from broker.services.dispatching.send import attempt_in_flight, attempt_lease_s, workload_adopt
from broker.services.following.escalations import escalation_open
from broker.services.fleet.inventory import cluster_mark_stale
from broker.services.fleet.policy import current_policy
from broker.services.quota.reservations import reservation_confirm, reservation_expire, reservation_release
from broker import runtime

DEFAULT_BUDGET_S = 60
DEFAULT_MAX_FOLLOW_UPS = 200


@dataclass
class ReconcileReport:
    stale_clusters: list[str] = field(default_factory=list)
    expired: int = 0
    confirmed: int = 0
    released: int = 0
    redispatched: int = 0  # dispatch follow-ups enqueued
    cancels_retried: int = 0  # cancel follow-ups enqueued
    escalations: int = 0
    errors: list[str] = field(default_factory=list)
    cut_short: bool = False
    left: dict[str, int] = field(default_factory=dict)  # what the next pass has to take up


log = logging.getLogger(__name__)
_P = ParamSpec("_P")
_R = TypeVar("_R")


class _OutOfBudget(Exception):
    """The pass's time is spent: stop here, record the run."""


@dataclass
class _Pass:
    now: datetime
    deadline: datetime
    max_follow_ups: int
    report: ReconcileReport = field(default_factory=ReconcileReport)

    def check(self, what: str, remaining: int) -> None:
        """Before each item: past the deadline, note what is left and stop the pass."""
        if runtime.now() >= self.deadline:
            self.report.cut_short = True
            self.report.left[what] = remaining
            raise _OutOfBudget

    def room(self) -> int:
        return max(0, self.max_follow_ups - self.report.redispatched - self.report.cancels_retried)


def _each(report: ReconcileReport, what: str, step: Callable[_P, _R], *args: _P.args, **kwargs: _P.kwargs) -> _R | None:
    """Run one item's step; its failure is logged and recorded, and the pass goes on, so one
    broken cluster (or one odd row) cannot stop the fleet's reconciliation.  None on failure."""
    try:
        return step(*args, **kwargs)
    except Exception as exc:
        log.exception("reconcile: %s failed", what)
        report.errors.append(f"{what}: {type(exc).__name__}: {exc}"[:500])
        return None


def reconcile_fleet(
    *, now: datetime | None = None, budget_s: float = DEFAULT_BUDGET_S, max_follow_ups: int = DEFAULT_MAX_FOLLOW_UPS
) -> ReconcileReport:
    started = runtime.now()
    run = _Pass(now=now or started, deadline=started + timedelta(seconds=budget_s), max_follow_ups=max_follow_ups)
    steps: list[tuple[str, Callable[[_Pass], None]]] = [
        ("stale", _mark_silent_clusters_stale),
        ("reservations", _expire_or_confirm_reservations),
        ("release", _release_ended),
        ("dispatches", _enqueue_dispatches),
        ("cancellations", _enqueue_cancellations),
        ("orphans", _find_orphans),
    ]  # the remote listings last
    try:
        for _name, step in steps:
            step(run)
    except _OutOfBudget:
        log.warning("reconcile: budget of %s s spent; left for the next pass: %s", budget_s, run.report.left)
    ReconcileRun.objects.create(started_at=started, finished_at=runtime.now(), report=run.report.__dict__)
    ReconcileRun.objects.filter(started_at__lt=started - timedelta(days=7)).delete()
    return run.report


def _mark_silent_clusters_stale(run: _Pass) -> None:
    limit = timedelta(seconds=current_policy().policy.staleness_limit_s)
    for cluster in Cluster.objects.filter(enabled=True):
        silent = cluster.last_inventory_at is None or run.now - cluster.last_inventory_at > limit
        if silent and cluster.health != ClusterHealth.STALE and cluster.last_inventory_at is not None:
            _each(
                run.report,
                f"cluster {cluster.name}",
                cluster_mark_stale,
                cluster=cluster,
                error=f"no inventory report for over {int(limit.total_seconds())} s",
            )
        if cluster.health == ClusterHealth.STALE or silent:
            run.report.stale_clusters.append(cluster.name)


def _expire_or_confirm_reservations(run: _Pass) -> None:
    due = list(
        Reservation.objects.filter(state=ReservationState.ACTIVE, expires_at__lt=run.now).select_related(
            "workload", "workload__cluster"
        )
    )
    for done, reservation in enumerate(due):
        run.check("reservations", len(due) - done)
        _each(run.report, f"reservation {reservation.id}", _expire_or_confirm, reservation, run)


def _expire_or_confirm(reservation: Reservation, run: _Pass) -> None:
    workload = reservation.workload
    if workload.destination_job_id:
        run.report.confirmed += reservation_confirm(workload=workload, cluster=workload.placed_cluster)
        return
    if workload.state == WorkloadState.DISPATCHING:
        answer, found = _destination_answer(workload)
        if found is not None:  # the reply was lost, the job is real: confirm it from this look-up
            run.report.confirmed += workload_adopt(workload_id=workload.id, found=found).state != workload.state
        if not _nothing_at_destination(answer):
            return  # outcome unknown and the destination can't tell yet: keep holding
    if reservation_expire(reservation_id=reservation.id, now=run.now):
        failpoint("reconcile.after_expire")
        run.report.expired += 1
        moves.requeue_expired(
            pk=workload.id,
            note=None,
            fields={
                "reason": LocalReason.OTHER,
                "raw_reason": "reservation expired before the destination acknowledged it",
            },
        )
        tasks_bridge.enqueue_place(workload.id)


class _Answer(enum.Enum):
    NOTHING = "nothing"  # the destination answered: no job for this workload
    FOUND = "found"
    UNKNOWN = "unknown"  # an attempt is still in flight, or the destination did not answer


def _destination_answer(workload: Workload) -> tuple[_Answer, DestinationJob | None]:
    """One look-up at the destination, and the job it found; it writes nothing and sends nothing."""
    if attempt_in_flight(workload):
        return _Answer.UNKNOWN, None
    try:
        failpoint("reconcile.before_lookup")
        found = backend_for(workload.cluster).find(workload.uid)
    except Unavailable:
        return _Answer.UNKNOWN, None
    return (_Answer.NOTHING, None) if found is None else (_Answer.FOUND, found)


def _nothing_at_destination(answer: _Answer) -> bool:
    """True only when the destination answered that it has no job for this workload."""
    return answer is _Answer.NOTHING


def _release_ended(run: _Pass) -> None:
    live = list(
        Reservation.objects.filter(
            state__in=LIVE_RESERVATION_STATES, workload__state__in=TERMINAL_STATES
        ).select_related("workload")
    )
    for done, reservation in enumerate(live):
        run.check("release", len(live) - done)
        run.report.released += (
            _each(
                run.report,
                f"reservation {reservation.id}",
                reservation_release,
                workload=reservation.workload,
                reason="workload already ended",
            )
            or 0
        )


def _enqueue_dispatches(run: _Pass) -> None:
    lease = timedelta(seconds=attempt_lease_s())
    stuck = (
        Workload.objects.filter(state__in=ON_THE_WAY_STATES, destination_job_id="", updated_at__lt=run.now - lease)
        .exclude(cluster__health=ClusterHealth.STALE)
        .order_by("updated_at")
        .values_list("id", flat=True)
    )
    _enqueue(run, "dispatches", list(stuck), tasks_bridge.enqueue_dispatch, "redispatched")


def _enqueue_cancellations(run: _Pass) -> None:
    # stale clusters included: a cancellation is retried until confirmed, a stale cluster may
    # still take it, and the try costs this pass nothing (the task makes the call)
    cancelling = (
        Workload.objects.filter(state=WorkloadState.CANCELLING).order_by("updated_at").values_list("id", flat=True)
    )
    _enqueue(run, "cancellations", list(cancelling), tasks_bridge.enqueue_cancel, "cancels_retried")


def _enqueue(run: _Pass, what: str, workload_ids: list[int], enqueue: Callable[[int], None], counter: str) -> None:
    """Enqueue follow-ups up to the pass's cap; the rest are counted as left for the next pass."""
    taken = workload_ids[: run.room()]
    for workload_id in taken:
        enqueue(workload_id)
        setattr(run.report, counter, getattr(run.report, counter) + 1)
    if len(taken) < len(workload_ids):
        run.report.left[what] = len(workload_ids) - len(taken)


def _find_orphans(run: _Pass) -> None:
    clusters = list(Cluster.objects.filter(enabled=True).exclude(health=ClusterHealth.STALE))
    for done, cluster in enumerate(clusters):
        run.check("orphans", len(clusters) - done)
        _each(run.report, f"cluster {cluster.name}", _orphans_on, cluster, run.report)


def _orphans_on(cluster: Cluster, report: ReconcileReport) -> None:
    try:
        failpoint("reconcile.before_listing")
        jobs = backend_for(cluster).active_jobs()
    except Unavailable as exc:
        cluster_mark_stale(cluster=cluster, error=str(exc))  # its error is on the cluster's row
        return
    known = dict(
        Workload.objects.filter(cluster=cluster).exclude(destination_job_id="").values_list("destination_job_id", "uid")
    )
    for job in jobs:
        if job.job_id in known:
            continue
        if not job.workload_id:
            continue  # no broker marker: a local user's job, the cluster's own (its GPUs are in the inventory)
        if Workload.objects.filter(uid=job.workload_id, destination_job_id="").exists():
            continue  # our own job whose dispatch reply is still being looked up
        escalation_open(
            kind=EscalationKind.ORPHAN_JOB,
            key=f"orphan:{cluster.name}:{job.job_id}",
            cluster=cluster,
            destination_job_id=job.job_id,
            gpus=job.gpus,
            workload=Workload.objects.filter(uid=job.workload_id).first() if job.workload_id else None,
            evidence={
                "job_id": job.job_id,
                "workload_id": job.workload_id,
                "state": job.state.value,
                "gpus": job.gpus,
                "nodes": list(job.nodes),
                "note": "its GPUs stay counted as busy until an admin decides",
            },
        )
        report.escalations += 1
