"""Spend-aware bursting and learned queue waits, for ``workload_place``.

``learned_waits`` builds the estimator (``broker.placement.wait_estimator``) from what the clusters
did: every workload that started in the last few half-lives, keyed by cluster x GPU class,
with its wait (start - submission).  ``burst_gate`` predicts how long the workload would
wait for on-prem GPUs and applies the policy's burst rule (``broker.placement.burst``)
to the cloud candidates.  The prediction made at a workload's first decision is kept in
its placement record (``predicted_wait_s``), so ``/fleet/`` can show the estimator's error
against the wait that followed.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from datetime import datetime, timedelta
from typing import Callable, Mapping, Sequence

from django.db.models import Count, Max, QuerySet, Sum

from broker.lifecycle import PLACEABLE_STATES, WorkloadState
from broker.models import GpuPool, Location, Workload
from broker.placement import Candidate, PreparedFleet
from broker.placement.burst import cloud_verdict, reassess_due
from broker.placement.policy import Policy
from broker.placement.record import PlacementRecord
from broker.spec import WorkloadSpec
from broker.placement.wait_estimator import WaitEstimator
from broker.services.placing.fleet_view import identity_scopes
from accounting.models import CloudTcoReading
from accounting.chargeback import crossing_words
from portal.metrics.readings import cloud_spend_month, cloud_tco_crossed

TIME_LIMIT_LOOKUP = "spec__time_limit_minutes"
HISTORY_HALF_LIVES = 4  # older starts weigh under 1/16: not worth reading
HOURS_PER_MONTH = 730.0


def _s(when: datetime) -> float:
    return when.timestamp()


# One estimator serves every decision until a start is recorded or a minute passes: a
# placement pass then reads the starts once (one small aggregate per decision), not per
# workload.  Keyed by what was read, so a changed database is never answered from memory.
REUSE_FOR_S = 60.0
# cloud spend this month per (tenant id, cluster), and what the on-prem GPUs cost in a month
MonthSpend = tuple[dict[tuple[int, str], Decimal], float]
_cache: dict[tuple[object, ...], tuple[datetime, WaitEstimator]] = {}


def learned_waits(*, now: datetime, policy: Policy) -> WaitEstimator:
    half_life = policy.queue.half_life_s
    since = now - timedelta(seconds=HISTORY_HALF_LIVES * half_life)
    starts = Workload.objects.filter(started_at__gte=since, started_at__lte=now, cluster__isnull=False)
    seen = starts.aggregate(n=Count("id"), last=Max("started_at"), top=Max("id"))
    key = (half_life, seen["n"], seen["last"], seen["top"])
    cached = _cache.get(key)
    if cached is not None and timedelta(0) <= now - cached[0] <= timedelta(seconds=REUSE_FOR_S):
        return cached[1]
    estimator = _learn(starts, half_life=half_life)
    _cache.clear()  # only the newest is ever asked for again
    _cache[key] = (now, estimator)
    return estimator


def _learn(starts: QuerySet[Workload], *, half_life: float) -> WaitEstimator:
    estimator = WaitEstimator(half_life_s=half_life)
    rows = starts.values_list("cluster__name", "gpu_class__slug", "created_at", "started_at", "total_gpus")
    for cluster, gpu_class, created, started, gpus in rows.iterator():
        if started is None or created is None:
            continue  # (the filter excludes it: for the type checker)
        estimator.observe((cluster, gpu_class or ""), _s(started), (started - created).total_seconds(), gpus)
    return estimator


@dataclass(frozen=True)
class BurstOutcome:
    ranked: list[Candidate]  # the candidates left (cloud ones removed when held back)
    held_back: str  # why the cloud was refused; "" when it was not
    onprem_wait_s: float | None  # predicted on-prem wait (None: no on-prem cluster could run it)


def could_run(fleet: PreparedFleet, spec: WorkloadSpec, tenant: str, location: str = "") -> list[str]:
    """Clusters (of ``location``, or any) the static filters let the job through to."""
    static = fleet.static_for(spec, tenant)
    return [
        name
        for name, c in fleet.clusters.items()
        if c.facts is not None and (not location or c.facts.location == location) and name not in static.excluded
    ]


def predicted_wait_s(
    *,
    workload: Workload,
    fleet: PreparedFleet,
    spec: WorkloadSpec,
    ranked: Sequence[Candidate],
    clusters: Sequence[str],
    estimator: WaitEstimator,
    now: datetime,
    ahead_gpus: Callable[[], int] | None = None,
) -> float | None:
    """The wait for a pool of ``clusters``: what jobs sent there lately waited when one
    fits now; else the GPUs queued ahead of it (older work held at the broker for its
    class, and those clusters' local queues) over the learned rate at which they start
    GPUs of its class.  None when no cluster of the list could run it.  ``ahead_gpus``: how
    a placement pass that holds the queue already counts those older GPUs (else a query)."""
    if not clusters:
        return None
    cls = workload.gpu_class.slug if workload.gpu_class else ""
    fitting = [c.cluster for c in ranked if c.cluster in clusters]
    if fitting:
        return min(estimator.mean_wait_s((n, cls), _s(now)) for n in fitting)
    ahead = (
        ahead_gpus()
        if ahead_gpus is not None
        else (
            Workload.objects.filter(
                gpu_class_id=workload.gpu_class_id, state__in=PLACEABLE_STATES, created_at__lt=workload.created_at
            )
            .exclude(id=workload.id)
            .aggregate(gpus=Sum("total_gpus"))["gpus"]
            or 0
        )
    )
    scopes = identity_scopes(workload.project)
    queued = sum(fleet.clusters[n].pending_ahead(scopes) for n in clusters)
    rate = sum(estimator.start_rate((n, cls), _s(now)) for n in clusters)
    cap = fleet.policy.queue.max_wait_s
    if rate <= 0:
        # nothing started there lately: the fixed prior model, from the local queues
        return min(cap, min(fleet.clusters[n].queue_wait_s for n in clusters) or cap)
    return min(cap, (ahead + queued + spec.total_gpus) / rate)


def burst_gate(
    *,
    workload: Workload,
    ranked: list[Candidate],
    fleet: PreparedFleet,
    spec: WorkloadSpec,
    now: datetime,
    estimator: WaitEstimator,
    ahead_gpus: Callable[[], int] | None = None,
    spend: Callable[[], MonthSpend] | None = None,
    crossed: Callable[[], Mapping[int, CloudTcoReading]] | None = None,
) -> BurstOutcome:
    """Keep or drop the cloud candidates by the policy's burst rule.  ``spend``: the month's
    cloud spend and on-prem TCO as a placement pass read them once (else read here);
    ``crossed``: the same for the tenants whose cloud spend passed the policy's share of
    on-prem TCO this month (read only where the policy stops bursting for them)."""
    policy = fleet.policy
    cloud = [c for c in ranked if location_of(fleet, c.cluster) == Location.CLOUD]
    if not cloud:
        return BurstOutcome(ranked, "", None)
    rule = policy.burst
    if rule.over_tco == "stop":
        reading = (crossed() if crossed is not None else cloud_tco_crossed(now)).get(workload.tenant_id)
        if reading is not None:
            left = [c for c in ranked if c not in cloud]
            return BurstOutcome(left, "" if left else crossing_words(reading, rule.over_tco), None)
    budget = workload.tenant.cloud_budget_month
    if rule.min_onprem_wait_s <= 0 and budget is None:
        return BurstOutcome(ranked, "", None)  # the rule is off and nothing caps spend
    onprem = could_run(fleet, spec, workload.tenant.slug, Location.ONPREM)
    wait = predicted_wait_s(
        workload=workload,
        fleet=fleet,
        spec=spec,
        ranked=ranked,
        clusters=onprem,
        estimator=estimator,
        now=now,
        ahead_gpus=ahead_gpus,
    )
    if wait is not None and any(c.cluster in onprem for c in ranked):
        wait = 0.0  # an on-prem pool fits now
    month, tco = spend() if spend is not None else (month_spend_committed(now), onprem_tco_month())
    spent = float(sum(v for (tenant, _), v in month.items() if tenant == workload.tenant_id))
    reassess = reassess_due(rule, float(sum(month.values())), tco)
    verdict = cloud_verdict(
        rule,
        onprem_wait_s=wait,
        gpu_cost=float(cloud[0].breakdown["gpu_cost"]),
        budget=float(budget) if budget is not None else None,
        spent=spent,
        reassess=reassess,
    )
    if verdict.allowed:
        return BurstOutcome(ranked, "", wait)
    left = [c for c in ranked if c not in cloud]
    # with an on-prem pool left the cloud was merely outranked: nothing is held back
    return BurstOutcome(left, "" if left else verdict.reason, wait)


def next_month(when: datetime) -> datetime:
    """The first instant of the calendar month after ``when``'s."""
    return (when.replace(day=1, hour=0, minute=0, second=0, microsecond=0) + timedelta(days=32)).replace(day=1)


# a tenant's cloud jobs that may still cost money: reserved or sent, queued, running
COMMITTED_STATES = (WorkloadState.RESERVED, WorkloadState.DISPATCHING, WorkloadState.QUEUED, WorkloadState.RUNNING)


def month_spend_committed(now: datetime) -> dict[tuple[int, str], Decimal]:
    """Per (tenant id, cloud cluster): the month's spend so far (``cloud_spend_month``) plus
    what the tenant's live cloud jobs may still cost this month, to their time limits.  A
    budget checked against the spend so far alone let a burst of jobs pass together, each
    seeing the others' cost as 0 until they had run (the production-loop replay found it)."""
    month = dict(cloud_spend_month(now))
    month_end = next_month(now)
    rows = Workload.objects.filter(cluster__location=Location.CLOUD, state__in=COMMITTED_STATES).values_list(
        "tenant_id", "cluster__name", "cluster__price_per_gpu_hour", "total_gpus", "started_at", TIME_LIMIT_LOOKUP
    )
    for tenant_id, cluster, price, gpus, started, limit_min in rows:
        ran_s = max(0.0, (now - started).total_seconds()) if started else 0.0
        left_s = min(max(0.0, float(limit_min or 0) * 60.0 - ran_s), (month_end - now).total_seconds())
        key = (tenant_id, cluster)
        month[key] = month.get(key, Decimal("0")) + price * gpus * Decimal(str(round(left_s / 3600.0, 6)))
    return month


def first_prediction(
    *,
    workload: Workload,
    ranked: list[Candidate],
    fleet: PreparedFleet,
    spec: WorkloadSpec,
    now: datetime,
    estimator: WaitEstimator,
    ahead_gpus: Callable[[], int] | None = None,
) -> float | None:
    """The wait predicted at the workload's first decision (kept from then on)."""
    earlier = PlacementRecord.from_json(workload.placement).predicted_wait_s
    if earlier is not None:
        return earlier
    return predicted_wait_s(
        workload=workload,
        fleet=fleet,
        spec=spec,
        ranked=ranked,
        clusters=could_run(fleet, spec, workload.tenant.slug),
        estimator=estimator,
        now=now,
        ahead_gpus=ahead_gpus,
    )


def onprem_tco_month() -> float:
    """What owning the on-prem GPUs costs in a month: every on-prem GPU for the month's
    hours at its cluster's on-prem rate (the accounting's TCO-derived price per GPU-hour)."""
    rows = GpuPool.objects.filter(cluster__location=Location.ONPREM, cluster__enabled=True).values_list(
        "gpus_total", "cluster__price_per_gpu_hour"
    )
    return float(sum(gpus * float(price) for gpus, price in rows)) * HOURS_PER_MONTH


def location_of(fleet: PreparedFleet, name: str) -> str:
    facts = fleet.clusters[name].facts if name in fleet.clusters else None
    return facts.location if facts is not None else ""
