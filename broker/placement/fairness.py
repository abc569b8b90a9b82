"""Starvation guards: order the pending queue, and let a long-waiting big gang hold a pool.

Ranking clusters for one workload cannot prevent starvation; ordering workloads can.
Small jobs backfill freed GPUs first, so a big gang may never see a pool empty enough.
Two remedies, both policy-driven:

* ``priority``: waiting adds points (twice as fast for big gangs), and a tenant below its
  minimum share gets a bonus.  The caller places workloads in ``order_pending`` order.
* ``should_hold_for_gang`` + ``hold_target``: once a big gang has waited long enough,
  the caller holds the pool closest to fitting it (``PreparedFleet.hold``); other
  workloads then see that pool as full, so running jobs drain it for the gang.
  Holds live in the PreparedFleet of one pass: the caller keeps them (with the gang's
  id) and re-applies them to each new fleet until the gang is placed or gives up.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Iterable, Mapping

from broker.placement.prepared_fleet import PreparedFleet
from broker.placement.policy import Aging, Policy
from broker.spec import WorkloadSpec

PRIORITY_POINTS = {"low": 0.0, "normal": 1.0, "high": 2.0}


@dataclass(frozen=True)
class Pending:
    key: str  # the workload id: the final, deterministic tie-break
    spec: WorkloadSpec
    tenant: str
    age_s: float = 0.0


def is_big_gang(spec: WorkloadSpec, aging: Aging) -> bool:
    return spec.total_gpus >= aging.big_gang_gpus


def aging_boost(spec: WorkloadSpec, age_s: float, aging: Aging) -> float:
    """Priority points for waiting; big gangs age twice as fast, capped at max_boost."""
    rate = aging.boost_per_hour * (2.0 if is_big_gang(spec, aging) else 1.0)
    return min(max(age_s, 0.0) / 3600.0 * rate, aging.max_boost)


def min_share_bonus(tenant: str, share_used: float, policy: Policy) -> float:
    """A tenant using less than its guaranteed share of the fleet jumps the queue."""
    guaranteed = policy.tenant(tenant).min_share
    return policy.aging.min_share_bonus if share_used < guaranteed else 0.0


def priority(spec: WorkloadSpec, tenant: str, age_s: float, share_used: float, policy: Policy) -> float:
    """Higher goes first: spec priority + aging boost + minimum-share bonus."""
    return (
        PRIORITY_POINTS.get(spec.priority, 1.0)
        + aging_boost(spec, age_s, policy.aging)
        + min_share_bonus(tenant, share_used, policy)
    )


def order_pending(items: Iterable[Pending], policy: Policy, shares: Mapping[str, float] | None = None) -> list[Pending]:
    """Placement order for a pass; ``shares``: each tenant's fraction of fleet GPUs in use."""
    shares = shares or {}
    return sorted(
        items, key=lambda p: (-priority(p.spec, p.tenant, p.age_s, shares.get(p.tenant, 0.0), policy), -p.age_s, p.key)
    )


def should_hold_for_gang(spec: WorkloadSpec, age_s: float, aging: Aging) -> bool:
    """A big gang that has waited past ``hold_after_s`` may reserve a pool to drain."""
    return is_big_gang(spec, aging) and age_s >= aging.hold_after_s


def hold_target(fleet: PreparedFleet, spec: WorkloadSpec, tenant: str, now: datetime) -> tuple[str, str] | None:
    """The eligible, fresh, unheld pool closest to fitting the gang (most workers fit
    now, then most free GPUs) among those that could hold it once idle: (cluster, pool),
    or None when no pool could ever hold it."""
    stale = fleet.stale(now)
    best: tuple[int, int, str, str] | None = None
    for entry in fleet.static_for(spec, tenant).entries:
        prepared = entry.prepared
        if entry.cluster in stale or prepared.held_by:
            continue
        if prepared.idle_capacity(spec) < spec.workers:
            continue
        cap = prepared.capacity_now(spec)
        key = (-cap, -prepared.index.all.cap[1], entry.cluster, prepared.pool.name)
        if best is None or key < best:
            best = key
    return (best[2], best[3]) if best else None
