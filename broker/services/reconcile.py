"""Reconciliation: the periodic (and start-up) pass that keeps the broker honest.

It expires reservations nobody acknowledged (after looking the workload up),
confirms the acknowledged, marks silent clusters stale, retries dispatches and
cancellations whose outcome is unknown, and escalates what nobody can explain.
It never releases an unclear allocation by itself.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Callable

from django.utils import timezone

from broker.backends.base import Unavailable
from broker.backends.registry import backend_for
from broker.models import (
    Cluster, ClusterHealth, EscalationKind, ReconcileRun, Reservation, ReservationState, Workload, WorkloadState,
)
from broker.lifecycle import LIVE_RESERVATION_STATES, ON_THE_WAY_STATES, TERMINAL_STATES, TransitionReason
from broker.models.workload import LocalReason
from broker.services import tasks_bridge
from broker.services.cancel import cancel_propagate
from broker.services.dispatch import attempt_in_flight, attempt_lease_s, workload_dispatch
from broker.services.escalations import escalation_open
from broker.services.inventory import cluster_mark_stale
from broker.services.policy import current_policy
from broker.services.quota import reservation_confirm, reservation_expire, reservation_release
from broker.services.transitions import transition


@dataclass
class ReconcileReport:
    stale_clusters: list[str] = field(default_factory=list)
    expired: int = 0
    confirmed: int = 0
    released: int = 0
    redispatched: int = 0
    cancels_retried: int = 0
    escalations: int = 0
    errors: list[str] = field(default_factory=list)


log = logging.getLogger(__name__)


def _each(report: ReconcileReport, what: str, step: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run one item's step; its failure is logged and recorded, and the pass goes on, so one
    broken cluster (or one odd row) cannot stop the fleet's reconciliation.  None on failure."""
    try:
        return step(*args, **kwargs)
    except Exception as exc:
        log.exception("reconcile: %s failed", what)
        report.errors.append(f"{what}: {type(exc).__name__}: {exc}"[:500])
        return None


def reconcile_fleet(*, now: datetime | None = None) -> ReconcileReport:
    now = now or timezone.now()
    started = timezone.now()
    report = ReconcileReport()
    _mark_silent_clusters_stale(now, report)
    _expire_or_confirm_reservations(now, report)
    _release_ended(report)
    _retry_dispatches(now, report)
    _retry_cancellations(report)
    _find_orphans(report)
    ReconcileRun.objects.create(started_at=started, finished_at=timezone.now(), report=report.__dict__)
    ReconcileRun.objects.filter(started_at__lt=started - timedelta(days=7)).delete()
    return report


def _mark_silent_clusters_stale(now: datetime, report: ReconcileReport) -> None:
    limit = timedelta(seconds=current_policy().policy.staleness_limit_s)
    for cluster in Cluster.objects.filter(enabled=True):
        silent = cluster.last_inventory_at is None or now - cluster.last_inventory_at > limit
        if silent and cluster.health != ClusterHealth.STALE and cluster.last_inventory_at is not None:
            _each(report, f"cluster {cluster.name}", cluster_mark_stale, cluster=cluster,
                  error=f"no inventory report for over {int(limit.total_seconds())} s")
        if cluster.health == ClusterHealth.STALE or silent:
            report.stale_clusters.append(cluster.name)


def _expire_or_confirm_reservations(now: datetime, report: ReconcileReport) -> None:
    due = Reservation.objects.filter(state=ReservationState.ACTIVE, expires_at__lt=now).select_related(
        "workload", "workload__cluster")
    for reservation in due:
        _each(report, f"reservation {reservation.id}", _expire_or_confirm, reservation, now, report)


def _expire_or_confirm(reservation: Reservation, now: datetime, report: ReconcileReport) -> None:
    workload = reservation.workload
    if workload.destination_job_id:
        report.confirmed += reservation_confirm(workload=workload, cluster=workload.placed_cluster)
        return
    if workload.state == WorkloadState.DISPATCHING and not _nothing_at_destination(workload):
        return  # outcome unknown and the destination can't tell yet: keep holding
    if reservation_expire(reservation_id=reservation.id, now=now):
        report.expired += 1
        transition(Workload, workload.id, to=WorkloadState.WAITING, from_=ON_THE_WAY_STATES,
                   reason=TransitionReason.RESERVATION_EXPIRED, note=None,  # reservation.expired is its record
                   fields={"reason": LocalReason.OTHER,
                           "raw_reason": "reservation expired before the destination acknowledged it"})
        tasks_bridge.enqueue_place(workload.id)


def _nothing_at_destination(workload: Workload) -> bool:
    """True only when the destination answered that it has no job for this workload.

    A found job is adopted on the spot (the reply was lost, the job is real)."""
    if attempt_in_flight(workload):
        return False
    try:
        found = backend_for(workload.cluster).find(workload.uid)
    except Unavailable:
        return False
    if found is not None:
        workload_dispatch(workload_id=workload.id)  # adopts it: the look-up comes first
        return False
    return True


def _release_ended(report: ReconcileReport) -> None:
    live = Reservation.objects.filter(state__in=LIVE_RESERVATION_STATES,
                                      workload__state__in=TERMINAL_STATES).select_related("workload")
    for reservation in live:
        report.released += _each(report, f"reservation {reservation.id}", reservation_release,
                                 workload=reservation.workload, reason="workload already ended") or 0


def _retry_dispatches(now: datetime, report: ReconcileReport) -> None:
    lease = timedelta(seconds=attempt_lease_s())
    stuck = Workload.objects.filter(state__in=ON_THE_WAY_STATES,
                                    destination_job_id="", updated_at__lt=now - lease)
    for workload in stuck.exclude(cluster__health=ClusterHealth.STALE):
        if _each(report, f"dispatch of {workload.uid}", workload_dispatch, workload_id=workload.id) is not None:
            report.redispatched += 1


def _retry_cancellations(report: ReconcileReport) -> None:
    for workload_id in Workload.objects.filter(state=WorkloadState.CANCELLING).values_list("id", flat=True):
        if _each(report, f"cancellation of workload {workload_id}", cancel_propagate,
                 workload_id=workload_id) is not None:
            report.cancels_retried += 1


def _find_orphans(report: ReconcileReport) -> None:
    for cluster in Cluster.objects.filter(enabled=True).exclude(health=ClusterHealth.STALE):
        _each(report, f"cluster {cluster.name}", _orphans_on, cluster, report)


def _orphans_on(cluster: Cluster, report: ReconcileReport) -> None:
    try:
        jobs = backend_for(cluster).active_jobs()
    except Unavailable as exc:
        cluster_mark_stale(cluster=cluster, error=str(exc))  # its error is on the cluster's row
        return
    known = dict(Workload.objects.filter(cluster=cluster).exclude(destination_job_id="")
                 .values_list("destination_job_id", "uid"))
    for job in jobs:
        if job.job_id in known:
            continue
        if job.workload_id and Workload.objects.filter(uid=job.workload_id, destination_job_id="").exists():
            continue  # our own job whose dispatch reply is still being looked up
        escalation_open(
            kind=EscalationKind.ORPHAN_JOB, key=f"orphan:{cluster.name}:{job.job_id}", cluster=cluster,
            destination_job_id=job.job_id, gpus=job.gpus,
            workload=Workload.objects.filter(uid=job.workload_id).first() if job.workload_id else None,
            evidence={"job_id": job.job_id, "workload_id": job.workload_id, "state": job.state.value,
                      "gpus": job.gpus, "nodes": list(job.nodes),
                      "note": "its GPUs stay counted as busy until an admin decides"})
        report.escalations += 1
