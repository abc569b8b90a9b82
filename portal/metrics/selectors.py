"""Chart data from the sampled history, scoped to the acting user.

Capacity is shared infrastructure (any member may see it, as on /fleet/); queue figures
and spend are per tenant, so a user sees only the tenants they belong to.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

from django.utils import timezone

from portal.metrics.models import CapacitySample, FigureSample
from portal.tenancy.access import AnyUser, is_operator, tenants_for

HISTORY = timedelta(days=7)
STATES = ("total", "allocated", "reserved", "idle")


def _epoch(moment: datetime) -> int:
    return int(moment.timestamp())


def _member(user: AnyUser) -> bool:
    return bool(user.is_authenticated and (is_operator(user) or tenants_for(user).exists()))


def capacity_history(*, user: AnyUser, now: datetime | None = None) -> list[dict]:
    """One series set per cluster x resource: GPUs by state over the last week (summed over
    classes; MIG slices are their own resource, so never added to whole GPUs)."""
    if not _member(user):
        return []
    since = (now or timezone.now()) - HISTORY
    charts: dict[tuple[str, str], dict] = {}
    rows = (
        CapacitySample.objects.filter(taken_at__gte=since)
        .order_by("taken_at")
        .values_list("cluster", "resource", "taken_at", *STATES)
    )
    for cluster, resource, taken_at, *counts in rows.iterator():
        chart = charts.setdefault(
            (cluster, resource), {"cluster": cluster, "resource": resource, "t": [], **{s: [] for s in STATES}}
        )
        t = _epoch(taken_at)
        if not chart["t"] or chart["t"][-1] != t:
            chart["t"].append(t)
            for s in STATES:
                chart[s].append(0)
        for s, value in zip(STATES, counts, strict=False):
            chart[s][-1] += value
    return [charts[k] for k in sorted(charts)]


def wait_history(*, user: AnyUser, now: datetime | None = None) -> list[dict]:
    """Queue wait p95 and time to first GPU p95 per tenant the user belongs to."""
    since = (now or timezone.now()) - HISTORY
    series: dict[str, dict] = {}
    rows = (
        FigureSample.objects.filter(taken_at__gte=since, tenant__in=tenants_for(user))
        .order_by("taken_at")
        .values_list("tenant__slug", "taken_at", "queue_wait_p95_s", "time_to_first_gpu_p95_s", "queue_depth")
    )
    for slug, taken_at, wait, first, depth in rows.iterator():
        s = series.setdefault(
            slug, {"tenant": slug, "t": [], "queue_wait_p95_s": [], "time_to_first_gpu_p95_s": [], "queue_depth": []}
        )
        s["t"].append(_epoch(taken_at))
        s["queue_wait_p95_s"].append(wait)
        s["time_to_first_gpu_p95_s"].append(first)
        s["queue_depth"].append(depth)
    return [series[k] for k in sorted(series)]


def spend_history(*, tenant_ids: set[int] | None, since: datetime, until: datetime) -> dict:
    """Month-to-date cloud spend summed over the given tenants (None: all) per sample instant.
    The caller decides the tenants (finance scope), as the chargeback report does."""
    rows = FigureSample.objects.filter(taken_at__gte=since, taken_at__lt=until)
    if tenant_ids is not None:
        rows = rows.filter(tenant_id__in=tenant_ids)
    totals: dict[int, float] = defaultdict(float)
    for taken_at, amount in rows.order_by("taken_at").values_list("taken_at", "cloud_spend_month").iterator():
        totals[_epoch(taken_at)] += float(amount)
    return {"t": list(totals), "spend": [round(v, 2) for v in totals.values()]}


def fleet_charts(*, user: AnyUser) -> dict:
    """Everything the /fleet/ charts draw, ready for ``json_script``."""
    now = timezone.now()
    return {"capacity": capacity_history(user=user, now=now), "waits": wait_history(user=user, now=now)}
