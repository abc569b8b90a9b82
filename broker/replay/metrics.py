"""What a replay run is scored on.  Every strategy is scored from the same ground truth
(the tracker's starts, the simulator's usage records), never from its own bookkeeping.

* queue wait: start - arrival, over the jobs that started (mean, and p50 and p95 by
  nearest rank);
* worst tenant's slowdown: a job's bounded slowdown is (wait + run) / max(run, 10 s) (the
  floor keeps a seconds-long job that waited a minute from ranking as a tenant's whole
  experience); a tenant's is the mean over its jobs that started, and the figure is the
  largest over tenants: how badly the policy treats the tenant it treats worst;
* time to first GPU: queue wait + the destination's startup (image pull + node
  provisioning, from the fleet file), which the simulator does not model as time;
* failed at the destination: jobs a destination refused, or held although its free
  GPUs summed covered them because the gang could not be packed (fragmentation);
* held at the destination: jobs that did not start where they were sent for another
  reason (local quota, not enough GPUs, behind earlier jobs in a FIFO queue);
* never placed: jobs that never started by the time nothing else could happen;
* GPU-hours per cluster (the schedulers' usage records); cloud spend = GPU-hours (and, on an
  elastic pool, the strategy's share of its billed idle and provisioning time) on
  cloud clusters x their price;
* utilisation: GPU-seconds used in the busy window, over the fleet's whole GPUs
  (MIG-partitioned nodes left out: no replayed job uses them).  The busy window runs
  from the 5th to the 95th percentile of arrival times: the openb trace's first pods
  trickle in over months before the rest, and counting that idle stretch would say
  more about the trace than about the policy;
* by group: the same waits per GPU class, single jobs and gangs apart, because a mean
  over 3,000 one-GPU jobs hides what happens to the few hundred gangs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from broker.fleet_file import FleetDescription
from broker.replay.jobs import ReplayJob
from broker.placement.wait_estimator import EstimatorReport
from broker.replay.loop import ReplayRun
from broker.replay.tracker import Outcome


@dataclass(frozen=True)
class Metrics:
    policy: str
    jobs: int
    started: int
    mean_wait_s: float
    p95_wait_s: float
    p95_gang_wait_s: float
    mean_ttfg_s: float
    p95_ttfg_s: float
    failed_at_destination: int
    fragmented: int
    rejected: int
    held_at_destination: int
    never_placed: int
    gpu_hours: dict[str, float]
    cloud_spend: float
    utilisation: float
    p50_wait_s: float = 0.0
    worst_tenant_slowdown: float = 0.0  # see the module's docstring
    worst_tenant: str = ""
    extra: dict[str, int] = field(default_factory=dict)
    by_group: dict[str, tuple[int, float, float]] = field(default_factory=dict)  # n, mean, p95
    # the gangs by shape ("2x4": workers x GPUs each), n, mean, p95: which gangs a policy serves
    by_gang_shape: dict[str, tuple[int, float, float]] = field(default_factory=dict)
    estimator: EstimatorReport | None = None  # the broker's presets only
    # the broker's jobs by fleet priority class, n, mean, p95 (the priority scenario)
    by_priority: dict[str, tuple[int, float, float]] = field(default_factory=dict)
    # the broker's jobs by tenant, n, mean, p95 (the minimum shares of the priority scenario)
    by_tenant: dict[str, tuple[int, float, float]] = field(default_factory=dict)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (0 for no values): an observed value, no interpolation."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def startup_s(fleet: FleetDescription, cluster: str) -> float:
    desc = fleet.cluster(cluster)
    return desc.image_pull_s + desc.provisioning_s


def whole_gpus(fleet: FleetDescription) -> int:
    return sum(g.count * g.gpus_per_node for c in fleet.clusters for g in c.node_groups if g.partitioning == "whole")


def busy_window(jobs: Sequence[ReplayJob]) -> tuple[float, float]:
    """5th to 95th percentile of arrival times."""
    arrivals = [j.submit_s for j in jobs]
    return percentile(arrivals, 5), percentile(arrivals, 95)


def offered_load(jobs: Sequence[ReplayJob]) -> float:
    """GPUs the jobs arriving in the busy window would keep busy, on average over it."""
    start, end = busy_window(jobs)
    if end <= start:
        return 0.0
    work = sum(j.total_gpus * j.duration_s for j in jobs if start <= j.submit_s <= end)
    return work / (end - start)


SLOWDOWN_FLOOR_S = 10.0  # run times below it count as this (bounded slowdown)


def tenant_slowdowns(outcomes: Sequence[Outcome]) -> dict[str, float]:
    """Per tenant, the mean bounded slowdown of its jobs that started."""
    per: dict[str, list[float]] = {}
    for o in outcomes:
        if o.wait_s is not None:
            run = max(o.job.duration_s, SLOWDOWN_FLOOR_S)
            per.setdefault(o.job.tenant, []).append((o.wait_s + run) / run)
    return {tenant: mean(values) for tenant, values in per.items()}


def worst_tenant(outcomes: Sequence[Outcome]) -> tuple[str, float]:
    """The tenant with the largest mean slowdown, and that slowdown (("", 0) for none)."""
    slowdowns = tenant_slowdowns(outcomes)
    if not slowdowns:
        return "", 0.0
    name = max(sorted(slowdowns), key=slowdowns.__getitem__)
    return name, slowdowns[name]


def group_of(outcome: Outcome) -> str:
    return f"{outcome.job.gpu_class} {'gangs' if outcome.job.workers > 1 else 'single'}"


def by_gang_shape(outcomes: Sequence[Outcome]) -> dict[str, tuple[int, float, float]]:
    waits: dict[str, list[float]] = {}
    for o in outcomes:
        if o.wait_s is not None and o.job.workers > 1:
            waits.setdefault(f"{o.job.workers}x{o.job.gpus_per_worker}", []).append(o.wait_s)
    return {g: (len(v), mean(v), percentile(v, 95)) for g, v in sorted(waits.items())}


def by_group(outcomes: Sequence[Outcome]) -> dict[str, tuple[int, float, float]]:
    waits: dict[str, list[float]] = {}
    for o in outcomes:
        if o.wait_s is not None:
            waits.setdefault(group_of(o), []).append(o.wait_s)
    return {g: (len(v), mean(v), percentile(v, 95)) for g, v in sorted(waits.items())}


NO_CLASS = "(none)"  # a job without a fleet priority class


def by_priority_class(outcomes: Sequence[Outcome]) -> dict[str, tuple[int, float, float]]:
    """Per fleet priority class of the broker's jobs: jobs started, mean and p95 wait (s)."""
    waits: dict[str, list[float]] = {}
    for o in outcomes:
        if o.wait_s is not None and not o.job.local:
            waits.setdefault(o.job.priority_class or NO_CLASS, []).append(o.wait_s)
    return {c: (len(v), mean(v), percentile(v, 95)) for c, v in sorted(waits.items())}


def by_tenant(outcomes: Sequence[Outcome]) -> dict[str, tuple[int, float, float]]:
    """Per tenant of the broker's jobs: jobs started, mean and p95 wait (s)."""
    waits: dict[str, list[float]] = {}
    for o in outcomes:
        if o.wait_s is not None and not o.job.local:
            waits.setdefault(o.job.tenant, []).append(o.wait_s)
    return {t: (len(v), mean(v), percentile(v, 95)) for t, v in sorted(waits.items())}


def preemption_cost(outcomes: Sequence[Outcome]) -> dict[str, int]:
    """What preemption cost the jobs it hit: how many, how many cuts, the GPU-hours their cut
    runs held (run again from the start: the replay's jobs declare no checkpoint), and the
    mean and p95 of how much later they ended than had they run at once (s)."""
    hit = [o for o in outcomes if o.preempted]
    late = [o.end_s - o.job.submit_s - o.job.duration_s for o in hit if o.end_s is not None]
    return {
        "preempted jobs": len(hit),
        "preemptions": sum(o.preempted for o in hit),
        "GPU-h lost to preemption": round(sum(o.lost_gpu_s for o in hit) / 3600.0),
        "preempted mean delay s": round(mean(late)),
        "preempted p95 delay s": round(percentile(late, 95)),
        "preempted never ended": sum(o.end_s is None for o in hit),
    }


def utilisation(run: ReplayRun, fleet: FleetDescription, window: tuple[float, float]) -> float:
    start, end = window
    if end <= start:
        return 0.0
    used = sum(gpus * max(0.0, min(e, end) - max(s, start)) for _, s, e, gpus in run.usage)
    return used / (whole_gpus(fleet) * (end - start))


def compute(run: ReplayRun, fleet: FleetDescription) -> Metrics:
    outcomes = list(run.outcomes.values())
    started = [o for o in outcomes if o.start_s is not None]
    waits = [o.wait_s for o in started if o.wait_s is not None]
    gang_waits = [o.wait_s for o in started if o.wait_s is not None and o.job.workers > 1]
    ttfg = [w + startup_s(fleet, o.cluster) for o, w in zip(started, waits, strict=True)]
    fragmented = sum(o.fragmented for o in outcomes)
    rejected = sum(o.rejected > 0 for o in outcomes)
    failed = sum(o.fragmented or o.rejected > 0 for o in outcomes)
    held = sum(o.held_at_destination and not o.fragmented for o in outcomes)
    hours = {name: run.gpu_seconds.get(name, 0.0) / 3600.0 for name in fleet.names}
    # an elastic pool's bill is its nodes' time, idle included: the strategy pays its share
    idle = {name: run.idle_gpu_seconds.get(name, 0.0) / 3600.0 for name in fleet.names}
    spend = sum((hours[c.name] + idle[c.name]) * c.price_per_gpu_hour for c in fleet.clusters if c.location == "cloud")
    tenant, slowdown = worst_tenant(outcomes)
    return Metrics(
        policy=run.strategy,
        jobs=len(outcomes),
        started=len(started),
        mean_wait_s=mean(waits),
        p95_wait_s=percentile(waits, 95),
        p95_gang_wait_s=percentile(gang_waits, 95),
        mean_ttfg_s=mean(ttfg),
        p95_ttfg_s=percentile(ttfg, 95),
        failed_at_destination=failed,
        fragmented=fragmented,
        rejected=rejected,
        held_at_destination=held,
        never_placed=len(outcomes) - len(started),
        gpu_hours=hours,
        cloud_spend=spend,
        utilisation=utilisation(run, fleet, busy_window([o.job for o in outcomes])),
        p50_wait_s=percentile(waits, 50),
        worst_tenant_slowdown=slowdown,
        worst_tenant=tenant,
        extra={**run.extra, **preemption_cost(outcomes)},
        by_group=by_group(outcomes),
        by_gang_shape=by_gang_shape(outcomes),
        estimator=run.estimator,
        by_priority=by_priority_class(outcomes),
        by_tenant=by_tenant(outcomes),
    )
