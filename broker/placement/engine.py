"""place(): filter the fleet, rank what is left, explain both.

The per-decision path reads the shape's cached static outcome, applies the three rules
that depend on the moment (quota, freshness, topology), and ranks the fitting pools.
"""
from __future__ import annotations

from datetime import datetime
from typing import Iterable, Mapping, Sequence

from broker.backends.base import InventorySnapshot
from broker.placement import filters as f
from broker.placement import terms
from broker.placement.facts import ClusterFacts
from broker.placement.fleet import Entry, PreparedFleet
from broker.placement.packing import MAX_GPUS_PER_WORKER
from broker.placement.policy import TERMS, Policy
from broker.placement.results import RULE_RANK, Candidate, Exclusion, PlacementResult, no_fit_reason
from broker.spec import WorkloadSpec


def place(snapshots: Sequence[InventorySnapshot],
          facts: Iterable[ClusterFacts] | Mapping[str, ClusterFacts],
          spec: WorkloadSpec, *, tenant: str, quota_remaining: int, now: datetime,
          policy: Policy, age_s: float = 0.0, runtime_hours: float | None = None,
          limit: int | None = None) -> PlacementResult:
    """One-off placement.  For many decisions against one inventory, build a
    PreparedFleet once and call ``place_prepared`` (or ``fleet.place``)."""
    fleet = PreparedFleet(snapshots, facts, policy)
    return place_prepared(fleet, spec, tenant=tenant, quota_remaining=quota_remaining,
                          now=now, age_s=age_s, runtime_hours=runtime_hours, limit=limit)


def place_prepared(fleet: PreparedFleet, spec: WorkloadSpec, *, tenant: str,
                   quota_remaining: int, now: datetime, age_s: float = 0.0,
                   runtime_hours: float | None = None, limit: int | None = None,
                   holder: str = "") -> PlacementResult:
    """Rank the pools where the whole gang fits now; say why every other cluster is out.

    ``quota_remaining``: GPUs left in the tenant's global quota for the class, including
    any borrowing the reservation layer allows.  ``age_s``: how long the workload has
    waited (raises the queue-wait weight).  ``runtime_hours``: a learnt runtime, else the
    time limit.  ``limit``: keep only the best N candidates (None: all).  ``holder``:
    the workload's id, so a pool held for it (``fleet.hold``) is usable by it alone."""
    policy = fleet.policy
    static = fleet.static_for(spec, tenant)
    excluded = dict(static.excluded)
    quota = f.filter_quota(spec.total_gpus, quota_remaining)
    if quota is not None:
        _overlay(excluded, dict.fromkeys(fleet.clusters, quota), "quota")
        return _result([], excluded, policy, policy.weights)
    stale = fleet.stale(now)
    _overlay(excluded, stale, "stale")
    fitting, misfits = _fit(static.entries, spec, stale, holder)
    for name, entry in misfits.items():
        if name in excluded or name in fitting:
            continue
        prepared = entry.prepared
        exc = f.filter_topology(
            prepared.pool.name, prepared.index, prepared.idle_capacity(spec), spec,
            prepared.held_by if prepared.held_by != holder else "", len(prepared.conflicted))
        if exc is not None:
            excluded[name] = exc
    weights = terms.aged_weights(policy.weights, age_s, policy.aging)
    entries = [e for group in fitting.values() for e in group]
    ranked = _rank(entries, spec, weights, runtime_hours, limit)
    return _result(ranked, excluded, policy, weights)


def _overlay(excluded: dict[str, Exclusion], new: Mapping[str, Exclusion], rule: str) -> None:
    """Apply a per-decision rule in its place in the order: it replaces only static
    exclusions by rules that come after it."""
    rank = RULE_RANK[rule]
    for name, exc in new.items():
        if name not in excluded or RULE_RANK[excluded[name].rule] > rank:
            excluded[name] = exc


def _fit(entries: list[Entry], spec: WorkloadSpec, stale: Mapping[str, Exclusion],
         holder: str) -> tuple[dict[str, list[Entry]], dict[str, Entry]]:
    """Split statically eligible pools into those the gang fits now and the rest
    (for each cluster with no fitting pool: the pool that came closest)."""
    g, w = spec.gpus_per_worker, spec.workers
    same = spec.same_interconnect and w > 1
    fitting: dict[str, list[Entry]] = {}
    misfits: dict[str, Entry] = {}
    closest: dict[str, int] = {}
    for entry in entries:
        name = entry.cluster
        if name in stale:
            continue
        prepared = entry.prepared
        index = prepared.index
        if g > MAX_GPUS_PER_WORKER:  # larger than any node the tables describe
            cap = 0
        else:
            cap = index.best_domain_cap()[g] if same else index.all.cap[g]
        if prepared.held_by and prepared.held_by != holder:
            cap = -1
        if cap >= w:
            fitting.setdefault(name, []).append(entry)
        elif cap > closest.get(name, -2):
            closest[name] = cap
            misfits[name] = entry
    return fitting, misfits


def _rank(entries: list[Entry], spec: WorkloadSpec, weights: dict[str, float],
          runtime_hours: float | None, limit: int | None) -> list[Candidate]:
    if not entries:
        return []
    size = spec.data_size_gb
    gpu_hours = spec.total_gpus * terms.runtime_hours(spec, runtime_hours)
    # raw terms in TERMS order: queue_wait_s, startup_s, gpu_cost, transfer_cost,
    # location, data_remote (the same formulas as terms.py, with constants hoisted)
    rows = [(e.queue_wait, e.start_base + size * e.stage_per_gb if size else e.start_base,
             e.price * gpu_hours, e.egress * size, e.location, e.remote) for e in entries]
    scored = terms.combine(rows, weights)
    order = sorted(range(len(entries)), key=lambda i: (
        scored[i][0], entries[i].cluster, entries[i].prepared.pool.name))
    if limit is not None:
        order = order[:limit]
    return [_candidate(entries[i], rows[i], scored[i], spec) for i in order]


def _candidate(entry: Entry, row: tuple[float, ...],
               scored: tuple[float, tuple[float, ...]], spec: WorkloadSpec) -> Candidate:
    prepared = entry.prepared
    index = prepared.index
    same = spec.same_interconnect and spec.workers > 1
    nodes = index.assign(spec.gpus_per_worker, spec.workers, same)
    assert nodes is not None, "a fitting pool must pack"  # capacity table says it fits
    return Candidate(
        cluster=entry.cluster, pool=prepared.pool.name, score=scored[0],
        breakdown=dict(zip(TERMS, row, strict=True)),
        weighted=dict(zip(TERMS, scored[1], strict=True)),
        assignment=tuple(map(index.names.__getitem__, nodes)), gpus_per_worker=spec.gpus_per_worker)


def _result(ranked: list[Candidate], excluded: dict[str, Exclusion], policy: Policy,
            weights: Mapping[str, float]) -> PlacementResult:
    return PlacementResult(ranked=ranked, excluded=excluded,
                           reason="" if ranked else no_fit_reason(excluded),
                           policy_version=policy.version, weights=dict(weights))
