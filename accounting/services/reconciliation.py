"""Reconciliation of one cluster and month: the broker's view vs the scheduler's records vs the bill.

Each run replaces the previous answer for the same cluster and month in one
transaction, so running it again gives the same rows, never more.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import cast

from django.contrib.auth.models import User
from django.db import transaction

from accounting.conf import tolerance as default_tolerance
from accounting.models import BillLine, Discrepancy, DiscrepancyKind as K, ReconciliationRun, UsageEntry
from accounting.periods import month_bounds, month_start
from broker.models import Cluster, ClusterHealth, Workload
from broker.outcomes import charged_gpus
from broker.services.records.audit import audit
from broker import runtime


@dataclass
class _Evidence:
    workloads: list[Workload]
    entries: list[UsageEntry]
    lines: list[BillLine]
    entries_by_workload: dict[int | None, list[UsageEntry]] = field(default_factory=dict)
    billed_workloads: set[int] = field(default_factory=set)


def reconciliation_run(
    *, cluster_id: int, period: date, actor: User | None = None, tolerance: float | None = None
) -> ReconciliationRun:
    cluster = Cluster.objects.get(id=cluster_id)
    period = month_start(period)
    tol = default_tolerance() if tolerance is None else tolerance
    ev = _gather(cluster, period)
    found = _broker_vs_scheduler(ev, tol) + _scheduler_only(ev) + _bill(ev)
    return _store(cluster, period, tol, ev, found, actor)


def reconciliation_run_all(*, period: date, actor: User | None = None) -> list[ReconciliationRun]:
    return [
        reconciliation_run(cluster_id=c, period=period, actor=actor)
        for c in Cluster.objects.filter(enabled=True).values_list("id", flat=True)
    ]


def broker_seconds(w: Workload) -> int:
    """GPU-seconds by the broker's record: the run time the cluster reported at the end when it
    reported one (a time-compressed simulation), else the span the broker saw."""
    # callers pass ended workloads (started_at and ended_at set); the ORM types both as optional
    ran = (
        w.run_seconds
        if w.run_seconds is not None
        else (cast(datetime, w.ended_at) - cast(datetime, w.started_at)).total_seconds()
    )
    return int(int(ran) * charged_gpus(w))


def _gather(cluster: Cluster, period: date) -> _Evidence:
    start, stop = month_bounds(period)
    workloads = list(
        Workload.objects.filter(
            cluster=cluster, started_at__isnull=False, ended_at__gte=start, ended_at__lt=stop
        ).order_by("id")
    )
    entries = list(UsageEntry.objects.filter(cluster=cluster, end__gte=start, end__lt=stop).order_by("id"))
    lines = list(
        BillLine.objects.filter(bill__cluster=cluster, usage_start__gte=start, usage_start__lt=stop)
        .select_related("bill")
        .order_by("id")
    )
    ev = _Evidence(workloads, entries, lines)
    # Match by workload whatever month the scheduler put it in: a job the broker saw end at
    # 23:59 and the scheduler at 00:01 is one job, not two discrepancies.
    linked = UsageEntry.objects.filter(
        cluster=cluster, workload_id__in=[w.id for w in workloads] + [ln.workload_id for ln in lines if ln.workload_id]
    )
    for e in linked.order_by("id"):
        ev.entries_by_workload.setdefault(e.workload_id, []).append(e)
    ev.billed_workloads = {ln.workload_id for ln in lines if ln.workload_id}
    return ev


def _broker_vs_scheduler(ev: _Evidence, tol: float) -> list[Discrepancy]:
    found = []
    for w in ev.workloads:
        entries = ev.entries_by_workload.get(w.id, [])
        ours = broker_seconds(w)
        if not entries:
            found.append(
                _d(
                    K.MISSING_IN_SCHEDULER,
                    w,
                    None,
                    broker=ours,
                    message=f"{w.uid} ran {ours / 3600:.2f} GPU-h by the broker; the scheduler has no record",
                )
            )
            continue
        theirs = sum(e.gpu_seconds for e in entries)
        if abs(ours - theirs) > tol * max(ours, theirs):
            found.append(
                _d(
                    K.HOURS_DIFFER,
                    w,
                    entries[0],
                    broker=ours,
                    scheduler=theirs,
                    message=f"{w.uid}: broker {ours / 3600:.2f} GPU-h, scheduler {theirs / 3600:.2f} GPU-h",
                )
            )
    return found


def _scheduler_only(ev: _Evidence) -> list[Discrepancy]:
    found = []
    for e in ev.entries:
        if e.project_id is None:
            found.append(
                _d(
                    K.UNMATCHED_ACCOUNT,
                    None,
                    e,
                    scheduler=e.gpu_seconds,
                    message=f"job {e.job_id}: account {e.account!r} matches no project",
                )
            )
        elif e.workload_id is None and e.workload_uid:
            found.append(
                _d(
                    K.MISSING_IN_BROKER,
                    None,
                    e,
                    scheduler=e.gpu_seconds,
                    message=f"job {e.job_id} names workload {e.workload_uid}, which the broker does not know",
                )
            )
        elif e.workload_id is None:
            found.append(
                _d(
                    K.JOB_WITHOUT_BROKER,
                    None,
                    e,
                    scheduler=e.gpu_seconds,
                    message=f"job {e.job_id} ({e.account}) ran without the broker",
                )
            )
    return found


def _bill(ev: _Evidence) -> list[Discrepancy]:
    found = []
    for ln in ev.lines:
        if ln.workload_id is None or ln.workload_id not in ev.entries_by_workload:
            found.append(
                _d(
                    K.BILL_WITHOUT_JOB,
                    None,
                    None,
                    line=ln,
                    message=f"{ln.bill.file_name} line {ln.line_no}: {ln.cost:.2f} for "
                    f"{ln.description or ln.resource_id or 'a resource'} with no job",
                )
            )
    if not ev.lines:
        return found  # no bill for this cluster and month: nothing to miss from it
    for e in ev.entries:
        if e.workload_id is not None and e.workload_id not in ev.billed_workloads:
            found.append(
                _d(
                    K.MISSING_IN_BILL,
                    None,
                    e,
                    scheduler=e.gpu_seconds,
                    message=f"job {e.job_id} ({e.workload_uid}) has no bill line",
                )
            )
    return found


def _d(
    kind: str,
    w: Workload | None,
    e: UsageEntry | None,
    *,
    line: BillLine | None = None,
    broker: int | None = None,
    scheduler: int | None = None,
    message: str,
) -> Discrepancy:
    owner = w or e or line
    assert owner is not None  # every finding names at least one record
    return Discrepancy(
        kind=kind,
        tenant_id=owner.tenant_id,
        project_id=owner.project_id,
        workload_id=w.id
        if w is not None
        else (e.workload_id if e is not None else (line.workload_id if line else None)),
        usage_entry=e,
        bill_line=line,
        job_id=e.job_id if e else (w.destination_job_id if w else ""),
        broker_gpu_seconds=broker,
        scheduler_gpu_seconds=scheduler,
        bill_cost=line.cost if line else None,
        message=message[:500],
    )


@transaction.atomic
def _store(
    cluster: Cluster, period: date, tol: float, ev: _Evidence, found: list[Discrepancy], actor: User | None
) -> ReconciliationRun:
    run, _ = ReconciliationRun.objects.select_for_update().update_or_create(
        cluster=cluster,
        period=period,
        defaults={
            "ran_at": runtime.now(),
            "ran_by": actor if getattr(actor, "pk", None) else None,
            "tolerance": tol,
            "cluster_stale": cluster.health == ClusterHealth.STALE,
            "workloads": len(ev.workloads),
            "jobs": len(ev.entries),
            "bill_lines": len(ev.lines),
            "broker_gpu_seconds": sum(broker_seconds(w) for w in ev.workloads),
            "scheduler_gpu_seconds": sum(e.gpu_seconds for e in ev.entries),
            "bill_cost": sum((ln.cost for ln in ev.lines), Decimal("0")),
        },
    )
    run.discrepancies.all().delete()
    for d in found:
        d.run = run
    Discrepancy.objects.bulk_create(found)
    audit(
        action="accounting.reconcile",
        actor=actor,
        cluster=cluster.name,
        message=f"{period:%Y-%m}: {len(found)} discrepancies",
        inputs={"period": f"{period:%Y-%m}", "tolerance": tol, "discrepancies": len(found)},
    )
    return run
