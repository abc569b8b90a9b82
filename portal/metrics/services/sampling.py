"""Take one sample of the fleet's figures (run on the beat schedule) and prune old ones."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from broker.models import Workload
from portal.metrics import readings
from portal.metrics.models import CapacitySample, FigureSample
from portal.tenancy.models import Tenant

# Queue wait and time to first GPU are taken over the workloads that started in this window.
WINDOW = timedelta(hours=1)


@transaction.atomic
def fleet_sample_take(*, now: datetime | None = None) -> int:
    """Store one capacity row per cluster x class x resource and one figure row per tenant;
    returns the number of rows written.  Samples older than the keep period go."""
    now = now or timezone.now()
    capacity = [
        CapacitySample(
            taken_at=now,
            cluster=c.cluster,
            location=c.location,
            gpu_class=c.gpu_class,
            resource=c.resource,
            total=c.total,
            allocatable=c.allocatable,
            allocated=c.allocated,
            reserved=c.reserved,
            idle=c.idle,
        )
        for c in readings.capacity_cells()
    ]
    CapacitySample.objects.bulk_create(capacity)
    figures = _tenant_figures(now)
    FigureSample.objects.bulk_create(figures)
    _prune(now)
    return len(capacity) + len(figures)


def _tenant_figures(now: datetime) -> list[FigureSample]:
    depth: defaultdict[int, int] = defaultdict(int)
    waiting = Workload.objects.filter(state__in=readings.WAITING_STATES).values_list("tenant_id", flat=True)
    for tenant_id in waiting.iterator():
        depth[tenant_id] += 1
    rows = list(
        readings.started_workloads(since=now - WINDOW)
        .filter(started_at__lte=now)
        .values_list("tenant_id", "created_at", "dispatched_at", "started_at")
    )
    waits, firsts = defaultdict(list), defaultdict(list)
    for (tenant_id, *_), (wait, first) in zip(rows, readings.waits(r[1:] for r in rows), strict=True):
        waits[tenant_id].append(wait)
        if first is not None:
            firsts[tenant_id].append(first)
    spend: defaultdict[int, Decimal] = defaultdict(Decimal)
    for (tenant_id, _), amount in readings.cloud_spend_month(now).items():
        spend[tenant_id] += amount
    return [
        FigureSample(
            taken_at=now,
            tenant_id=tenant_id,
            queue_depth=depth[tenant_id],
            started=len(waits[tenant_id]),
            queue_wait_p95_s=readings.percentile(waits[tenant_id], 0.95),
            time_to_first_gpu_p95_s=readings.percentile(firsts[tenant_id], 0.95),
            cloud_spend_month=spend[tenant_id],
        )
        for tenant_id in Tenant.objects.values_list("id", flat=True)
    ]


def _prune(now: datetime) -> None:
    cutoff = now - timedelta(days=settings.GPUBROKER_SAMPLE_KEEP_DAYS)
    CapacitySample.objects.filter(taken_at__lt=cutoff).delete()
    FigureSample.objects.filter(taken_at__lt=cutoff).delete()
