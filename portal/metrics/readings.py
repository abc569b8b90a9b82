"""Fleet-wide reads for the scrape and the sampler (no user: both run as the platform).

Figures come from the database at read time, so they are right after a restart; the
pages read the sampled history through ``selectors``, scoped to the user.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Iterable, Iterator

from django.db.models import Count, F, FloatField, Func, Q, Sum

from accounting.models import CloudTcoReading
from accounting.periods import month_start
from broker.models import (
    AuditRecord,
    Cluster,
    Escalation,
    EscalationState,
    GpuClass,
    GpuPool,
    Location,
    ReconcileRun,
    Workload,
    WorkloadState,
)
from broker.placement.policy import model_key
from broker.spec import SHARED_PARTITIONINGS
from portal.metrics.models import TaskFailureCount
from portal.tenancy.models import Tenant

WAITING_STATES = (
    WorkloadState.SUBMITTED,
    WorkloadState.WAITING,
    WorkloadState.RESERVED,
    WorkloadState.DISPATCHING,
    WorkloadState.QUEUED,
)
FAILED_PLACEMENT_ACTIONS = ("dispatch.rejected", "workload.rejected")
GPU_STATES = ("total", "allocatable", "allocated", "reserved", "idle")
UNCLASSIFIED = "unclassified"
CENT = Decimal("0.01")


@dataclass
class CapacityCell:
    cluster: str
    location: str
    gpu_class: str
    resource: str
    total: int = 0
    allocatable: int = 0
    allocated: int = 0
    reserved: int = 0
    idle: int = 0

    def add(self, pool: GpuPool) -> None:
        for state in GPU_STATES:
            setattr(self, state, getattr(self, state) + getattr(pool, f"gpus_{state}"))


def resource_of(partitioning: str) -> str:
    """Whole GPUs are ``gpu``; a MIG pool counts slices of its profile and a shared pool its
    shares (``shares-time-slicing``: replicas, ``shares-shard``), never GPUs."""
    kind = partitioning.lower()
    if kind == "whole":
        return "gpu"
    return f"shares-{kind}" if kind in SHARED_PARTITIONINGS else f"mig-{kind}"


def class_of(gpu_model: str, memory_gb: int, classes: list[GpuClass]) -> str:
    """The narrowest class a pool's GPUs belong to (classes overlap: an 80 GB A100 also
    satisfies a100-40gb); each pool is counted once, under the class with the most memory."""
    key = model_key(gpu_model)
    fitting = [c for c in classes if memory_gb >= c.min_memory_gb and key in {model_key(m) for m in c.gpu_models}]
    return max(fitting, key=lambda c: (c.min_memory_gb, c.slug)).slug if fitting else UNCLASSIFIED


def capacity_cells() -> list[CapacityCell]:
    classes = list(GpuClass.objects.all())
    cells: dict[tuple[str, str, str], CapacityCell] = {}
    for pool in GpuPool.objects.select_related("cluster").filter(cluster__enabled=True):
        key = (pool.cluster.name, class_of(pool.gpu_model, pool.gpu_memory_gb, classes), resource_of(pool.partitioning))
        cell = cells.setdefault(key, CapacityCell(key[0], pool.cluster.location, key[1], key[2]))
        cell.add(pool)
    return [cells[k] for k in sorted(cells)]


def queue_depth_by_class() -> dict[str, int]:
    depth: dict[str, int] = defaultdict(int)
    rows = Workload.objects.filter(state__in=WAITING_STATES).values_list("gpu_class__slug")
    for (slug,) in rows.iterator():
        depth[slug or UNCLASSIFIED] += 1
    return dict(depth)


class SecondsBetween(Func):
    """``end - start`` in seconds, in the database's own arithmetic (Django's generic duration
    expression calls a Python function per row on SQLite, 100 times slower for a scrape)."""

    output_field = FloatField()
    _TEMPLATES = {
        "sqlite": "((julianday({end}) - julianday({start})) * 86400.0)",
        "postgresql": "EXTRACT(EPOCH FROM ({end} - {start}))",
    }

    def __init__(self, end: str, start: str):
        super().__init__(F(end), F(start))

    def as_sql(self, compiler, connection, **extra):
        template = self._TEMPLATES.get(connection.vendor)
        if template is None:
            raise NotImplementedError(f"SecondsBetween on {connection.vendor}")
        (end_sql, end_params), (start_sql, start_params) = (compiler.compile(e) for e in self.get_source_expressions())
        return template.format(end=end_sql, start=start_sql), (*end_params, *start_params)


def wait_histogram(start_field: str, buckets: tuple[float, ...]) -> tuple[list[int], float, int]:
    """Per-bucket counts (cumulative, ``le``), the sum in seconds and the count of
    ``started_at - <start_field>`` over every started workload, computed by the database:
    a scrape must stay cheap with hundreds of thousands of workloads."""
    qs = Workload.objects.filter(started_at__isnull=False, **{f"{start_field}__isnull": False}).annotate(
        span=SecondsBetween("started_at", start_field)
    )
    counts = {f"le{i}": Count("id", filter=Q(span__lte=b)) for i, b in enumerate(buckets)}
    row = qs.aggregate(total=Count("id"), seconds=Sum("span"), **counts)
    return [row[f"le{i}"] for i in range(len(buckets))], float(row["seconds"] or 0.0), row["total"]


def waits(workloads: Iterable[tuple[datetime, datetime | None, datetime]]) -> Iterator[tuple[float, float | None]]:
    """(queue wait, time to first GPU) per started workload, in seconds.

    Queue wait runs from submission to the first GPU; time to first GPU from the hand-over
    to the cluster's scheduler to the first GPU (the part the destination is responsible for)."""
    for created, dispatched, started in workloads:
        wait = max(0.0, (started - created).total_seconds())
        first = max(0.0, (started - dispatched).total_seconds()) if dispatched else None
        yield wait, first


def started_workloads(since: datetime | None = None):
    qs = Workload.objects.filter(started_at__isnull=False)
    if since is not None:
        qs = qs.filter(started_at__gte=since)
    return qs


def failed_placements() -> int:
    return AuditRecord.objects.filter(action__in=FAILED_PLACEMENT_ACTIONS).count()


def task_failures() -> dict[str, int]:
    """Task name -> failures counted since its first (the workers count them, see
    ``portal.metrics.tasks.count_task_failure``)."""
    return dict(TaskFailureCount.objects.values_list("task", "failures"))


def reconcile_lag_s(now: datetime) -> float | None:
    last = ReconcileRun.objects.order_by("-finished_at").first()
    return (now - last.finished_at).total_seconds() if last else None


def oldest_open_escalation_s(now: datetime) -> float | None:
    """Seconds the oldest escalation still open has waited for an admin (None: none open)."""
    first = Escalation.objects.filter(state=EscalationState.OPEN).order_by("created_at").first()
    return (now - first.created_at).total_seconds() if first else None


def open_escalations_by_kind() -> dict[str, int]:
    rows = Escalation.objects.filter(state=EscalationState.OPEN).values("kind").annotate(n=Count("id"))
    return {row["kind"]: row["n"] for row in rows}


def spend_per_tenant(month_spend: dict[tuple[int, str], Decimal]) -> dict[int, Decimal]:
    """``cloud_spend_month``'s figures summed per tenant id, to the cent."""
    spend: dict[int, Decimal] = defaultdict(Decimal)
    for (tenant_id, _), amount in month_spend.items():
        spend[tenant_id] += amount
    return {t: v.quantize(CENT) for t, v in spend.items()}


def tenant_cloud_budgets(month_spend: dict[tuple[int, str], Decimal]) -> dict[str, tuple[Decimal, Decimal]]:
    """Tenant slug -> (estimated cloud spend this month, monthly cloud budget), for tenants
    that have a budget; ``month_spend``: ``cloud_spend_month``'s figures (read once a scrape)."""
    spend = spend_per_tenant(month_spend)
    return {
        t.slug: (spend.get(t.id, Decimal("0.00")), t.cloud_budget_month)
        for t in Tenant.objects.filter(cloud_budget_month__isnull=False)
        if t.cloud_budget_month is not None
    }


def inventory_age_s(now: datetime) -> dict[str, float | None]:
    return {
        c.name: (now - c.last_inventory_at).total_seconds() if c.last_inventory_at else None
        for c in Cluster.objects.filter(enabled=True)
    }


def cloud_spend_month(now: datetime) -> dict[tuple[int, str], Decimal]:
    """Estimated cloud spend since the first of the month per (tenant id, cluster): GPU-hours
    run this month x the cluster's list price, running jobs so far (bills come later)."""
    first = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    spend: dict[tuple[int, str], Decimal] = defaultdict(Decimal)
    rows = (
        Workload.objects.filter(cluster__location=Location.CLOUD, started_at__isnull=False, started_at__lt=now)
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gte=first))
        .values_list(
            "tenant_id",
            "cluster__name",
            "cluster__price_per_gpu_hour",
            "total_gpus",
            "started_at",
            "ended_at",
            "run_seconds",
        )
    )
    for tenant_id, cluster, price, gpus, started, ended, run_s in rows.iterator():
        assert started is not None  # the filter keeps only started workloads
        seconds = _seconds_this_month(started, min(ended or now, now), first, run_s)
        spend[(tenant_id, cluster)] += Decimal(seconds) / 3600 * gpus * price
    return {k: v.quantize(CENT) for k, v in spend.items()}


def _seconds_this_month(started: datetime, until: datetime, first: datetime, run_s: float | None) -> float:
    """The run time in this month: the cluster's own figure when it gave one (a simulated
    cluster's clock may run faster than ours), the share of it after the first of the month."""
    span = max(0.0, (until - started).total_seconds())
    in_month = max(0.0, (until - max(started, first)).total_seconds())
    if run_s is None:
        return in_month
    if started >= first:
        return run_s
    return run_s * in_month / span if span > 0 else 0.0


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def cloud_tco_readings(now: datetime) -> list[CloudTcoReading]:
    """This month's readings of cloud spend against on-prem TCO, one per tenant that has
    cloud use (``accounting.services.cloud_tco`` keeps them)."""
    return list(CloudTcoReading.objects.filter(month=month_start(now)).select_related("tenant"))


def cloud_tco_crossed(now: datetime) -> dict[int, CloudTcoReading]:
    """Per tenant id: the reading of this month that crossed the policy's share, if any."""
    rows = CloudTcoReading.objects.filter(month=month_start(now), crossed_at__isnull=False).select_related("tenant")
    return {r.tenant_id: r for r in rows}
