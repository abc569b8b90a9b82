"""place(): filter the fleet, rank what is left, explain both.

The per-decision path reads the shape's cached static outcome, applies the three rules
that depend on the moment (quota, freshness, topology), and ranks the fitting pools.
"""

from __future__ import annotations

from datetime import datetime
from typing import Iterable, Mapping, Sequence

from broker.cluster_report import InventorySnapshot, QueueStats
from broker.placement import admission
from broker.placement import filters as f
from broker.placement import terms
from broker.placement.facts import ClusterFacts
from broker.placement.prepared_fleet import Entry, PreparedFleet, PreparedPool
from broker.placement.policy import TERMS, Policy
from broker.placement.results import RULE_RANK, Candidate, Exclusion, PlacementResult, no_fit_reason
from broker.spec import WorkloadSpec


def place(
    snapshots: Sequence[InventorySnapshot],
    facts: Iterable[ClusterFacts] | Mapping[str, ClusterFacts],
    spec: WorkloadSpec,
    *,
    tenant: str,
    quota_remaining: int,
    now: datetime,
    policy: Policy,
    age_s: float = 0.0,
    runtime_hours: float | None = None,
    limit: int | None = None,
    cloud_quota_remaining: int | None = None,
) -> PlacementResult:
    """One-off placement.  For many decisions against one inventory, build a
    PreparedFleet once and call ``place_prepared`` (or ``fleet.place``)."""
    fleet = PreparedFleet(snapshots, facts, policy)
    return place_prepared(
        fleet,
        spec,
        tenant=tenant,
        quota_remaining=quota_remaining,
        now=now,
        age_s=age_s,
        runtime_hours=runtime_hours,
        limit=limit,
        cloud_quota_remaining=cloud_quota_remaining,
    )


def place_prepared(
    fleet: PreparedFleet,
    spec: WorkloadSpec,
    *,
    tenant: str,
    quota_remaining: int,
    now: datetime,
    age_s: float = 0.0,
    runtime_hours: float | None = None,
    limit: int | None = None,
    holder: str = "",
    cloud_quota_remaining: int | None = None,
    scopes: Sequence[str] = (),
) -> PlacementResult:
    """Rank the pools where the whole gang fits now; say why every other cluster is out.

    ``quota_remaining``: GPUs left in the tenant's global quota for the class, including
    any borrowing the reservation layer allows.  ``cloud_quota_remaining``: the same on
    cloud clusters, where the tenant's ``burst_gpus`` come on top (None: no burst).
    ``age_s``: how long the workload has waited (raises the queue-wait weight).
    ``runtime_hours``: a learnt runtime, else the time limit.  ``limit``: keep only the
    best N candidates (None: all).  ``holder``: the workload's id, so a pool held for it
    (``fleet.hold``) is usable by it alone.  ``scopes``: the accounts/queues the job runs
    under, for local limits that apply to one account only.  Off-peak work
    (``placement.off_peak``) starts only where the site's window is open at ``now``."""
    policy = fleet.policy
    static = fleet.static_for(spec, tenant)
    excluded = dict(static.excluded)
    out = _quota_exclusions(fleet, spec, quota_remaining, cloud_quota_remaining)
    if len(out) == len(fleet.clusters):
        _overlay(excluded, out, "quota")
        return _result([], excluded, policy, policy.weights)
    _overlay(excluded, out, "quota")
    stale = fleet.stale(now)
    _overlay(excluded, stale, "stale")
    closed = fleet.off_peak_closed(spec, now)
    _overlay(excluded, {k: e for k, (e, opens) in closed.items() if opens is None and k not in excluded}, "policy")
    entries, never, later = _admissible(fleet, static.entries, spec, scopes, set(out))
    _overlay(excluded, never, "local_limit")
    _overlay(excluded, later, "local_quota")
    fitting, misfits = _fit(entries, spec, stale, holder)
    for name, group in misfits.items():
        if name in excluded or name in fitting:
            continue
        excluded[name] = _misfit(fleet, group, spec, holder)
    for name in closed:  # it would fit or wait there, but not before the window opens
        fitting.pop(name, None)
    _overlay(excluded, {k: e for k, (e, opens) in closed.items() if opens is not None}, "off_peak")
    weights = terms.aged_weights(policy.weights, age_s, policy.aging)
    kept = [e for group in fitting.values() for e in group]
    ranked = _rank(kept, spec, weights, runtime_hours, limit, waits=_scoped_waits(fleet, kept, scopes))
    return _result(ranked, excluded, policy, weights)


def _scoped_waits(fleet: PreparedFleet, entries: Iterable[Entry], scopes: Sequence[str]) -> dict[str, float]:
    """Each destination's queue-wait term for a job running under ``scopes``: where fair
    share orders the local queue, the pending GPUs of accounts below the job's do not wait
    ahead of it (the calibration found Slurm starting them after it)."""
    model = fleet.policy.queue
    return {name: fleet.clusters[name].queue_wait_for(scopes, model) for name in {e.cluster for e in entries}}


def _quota_exclusions(
    fleet: PreparedFleet, spec: WorkloadSpec, remaining: int, cloud_remaining: int | None
) -> dict[str, Exclusion]:
    """The global quota: every cluster is out when it is short; with a burst allowance
    that covers the job, only the on-prem ones are."""
    quota = f.filter_quota(spec.total_gpus, remaining)
    if quota is None:
        return {}
    if cloud_remaining is None or cloud_remaining < spec.total_gpus:
        return dict.fromkeys(fleet.clusters, quota)
    burst = Exclusion(
        "quota",
        f"{quota.message}; the tenant's burst allowance ({cloud_remaining} GPUs left) applies to cloud clusters only",
    )
    return {name: burst for name, c in fleet.clusters.items() if not (c.facts and c.facts.location == "cloud")}


def _admissible(
    fleet: PreparedFleet,
    entries: list[Entry],
    spec: WorkloadSpec,
    scopes: Sequence[str],
    out: set[str],
) -> tuple[list[Entry], dict[str, Exclusion], dict[str, Exclusion]]:
    """Pools whose local limits admit the job now; for clusters left with none, the rule
    that stops it for good (``never``) or until quota comes free (``later``)."""
    kept: list[Entry] = []
    never: dict[str, Exclusion] = {}
    later: dict[str, Exclusion] = {}
    for entry in entries:
        if entry.cluster in out:
            continue
        cluster = fleet.clusters[entry.cluster]
        if cluster.limits:
            pool = entry.prepared.pool
            exc = admission.never_admitted(cluster.limits, pool, spec, scopes)
            if exc is not None:
                never.setdefault(entry.cluster, exc)
                continue
            queue = cluster.snapshot.queue if cluster.snapshot else QueueStats()
            exc = admission.short_now(cluster.limits, pool.name, spec, queue, fleet.policy.queue, scopes)
            if exc is not None:
                later.setdefault(entry.cluster, exc)
                continue
        kept.append(entry)
    admitted = {e.cluster for e in kept}
    return (
        kept,
        {k: v for k, v in never.items() if k not in admitted},
        {k: v for k, v in later.items() if k not in admitted and k not in never},
    )


def _misfit(fleet: PreparedFleet, group: list[Entry], spec: WorkloadSpec, holder: str) -> Exclusion:
    """Why none of a cluster's pools takes the gang now: the pool closest to fitting, but
    'never fits' only when no pool could hold it even idle.  An autoscaling cluster may
    grow, so for it 'never' is only 'not now'."""
    found: list[Exclusion] = []
    for entry in group:
        prepared = entry.prepared
        exc = f.filter_topology(
            prepared.pool.name,
            prepared.index,
            prepared.idle_capacity(spec),
            spec,
            prepared.held_by if prepared.held_by != holder else "",
            len(prepared.conflicted),
            prepared.ever_capacity(spec),
            want=prepared.grouping(spec),
        )
        if exc is not None:
            found.append(exc)
    waiting = [e for e in found if e.rule != "never_fits"]
    if waiting:
        return waiting[0]
    exc = found[0] if found else Exclusion("topology", "no pool takes the gang now")
    if fleet.clusters[group[0].cluster].autoscaling:
        return Exclusion("topology", f"{exc.message}; the cluster autoscales, so it may grow")
    return exc


def _overlay(excluded: dict[str, Exclusion], new: Mapping[str, Exclusion], rule: str) -> None:
    """Apply a per-decision rule in its place in the order: it replaces only static
    exclusions by rules that come after it."""
    rank = RULE_RANK[rule]
    for name, exc in new.items():
        if name not in excluded or RULE_RANK[excluded[name].rule] > rank:
            excluded[name] = exc


def _fit(
    entries: list[Entry], spec: WorkloadSpec, stale: Mapping[str, Exclusion], holder: str
) -> tuple[dict[str, list[Entry]], dict[str, list[Entry]]]:
    """Split statically eligible pools into those the gang fits now and the rest (per
    cluster with no fitting pool: its pools, closest to fitting first)."""
    w = spec.workers
    fitting: dict[str, list[Entry]] = {}
    misfits: dict[str, list[tuple[int, Entry]]] = {}
    for entry in entries:
        name = entry.cluster
        if name in stale:
            continue
        prepared = entry.prepared
        cap = prepared.capacity_now(spec)  # 0 beyond the largest worker the tables describe
        if prepared.held_by and prepared.held_by != holder:
            cap = -1
        if cap >= w:
            fitting.setdefault(name, []).append(entry)
        else:
            misfits.setdefault(name, []).append((cap, entry))
    return fitting, {
        name: [e for _, e in sorted(group, key=lambda x: -x[0])]
        for name, group in misfits.items()
        if name not in fitting
    }


def _rank(
    entries: list[Entry],
    spec: WorkloadSpec,
    weights: dict[str, float],
    runtime_hours: float | None,
    limit: int | None,
    assign: bool = True,
    waits: Mapping[str, float] | None = None,
) -> list[Candidate]:
    """``waits``: the queue-wait term per cluster where it is not the entry's own."""
    if not entries:
        return []
    waits = waits or {}
    size = spec.data_size_gb
    gpu_hours = spec.total_gpus * terms.runtime_hours(spec, runtime_hours)
    # raw terms in TERMS order: queue_wait_s, startup_s, gpu_cost, transfer_cost,
    # location, data_remote (the same formulas as terms.py, with constants hoisted)
    rows = [
        (
            waits.get(e.cluster, e.queue_wait),
            e.start_base + size * e.stage_per_gb if size else e.start_base,
            e.price * (gpu_hours + spec.total_gpus * e.tail_h),  # an elastic pool's idle tail too
            e.egress * size,
            e.location,
            e.remote,
        )
        for e in entries
    ]
    scored = terms.combine(rows, weights)
    penalty = preference_penalty(weights) if spec.level_preferred else 0.0
    if penalty:  # a pool that cannot keep the preferred level scores one term worse
        scored = [
            (s + penalty, w) if not _keeps_preferred(e.prepared, spec) else (s, w)
            for (s, w), e in zip(scored, entries, strict=True)
        ]
    order = sorted(range(len(entries)), key=lambda i: (scored[i][0], entries[i].cluster, entries[i].prepared.pool.name))
    if limit is not None:
        order = order[:limit]
    return [_candidate(entries[i], rows[i], scored[i], spec, assign, penalty) for i in order]


def _candidate(
    entry: Entry,
    row: tuple[float, ...],
    scored: tuple[float, tuple[float, ...]],
    spec: WorkloadSpec,
    assign: bool,
    penalty: float = 0.0,
) -> Candidate:
    prepared = entry.prepared
    index = prepared.index
    # a job sent to wait in the destination's queue has no nodes yet: its scheduler picks them
    nodes = index.assign(spec.gpus_per_worker, spec.workers, *_packing(prepared, spec)) if assign else []
    assert nodes is not None, "a fitting pool must pack"  # capacity table says it fits
    return Candidate(
        cluster=entry.cluster,
        pool=prepared.pool.name,
        score=scored[0],
        breakdown=dict(zip(TERMS, row, strict=True)),
        weighted=dict(zip(TERMS, scored[1], strict=True)),
        assignment=tuple(map(index.names.__getitem__, nodes)),
        gpus_per_worker=spec.gpus_per_worker,
        detail=_detail(entry, spec, penalty),
        units_per_gpu=prepared.pool.units_per_gpu,
    )


def preference_penalty(weights: Mapping[str, float]) -> float:
    """What a pool that cannot keep a preferred topology level adds to its score: as much as
    the heaviest term can (each term is normalised to 0..1 across the candidates, times its
    weight), so the preference outweighs any one term's difference but not all of them."""
    return max(weights.values(), default=1.0)


def _keeps_preferred(prepared: PreparedPool, spec: WorkloadSpec) -> bool:
    """The pool holds the gang within one domain of the level the spec prefers, now."""
    preferred = prepared.preferred_level(spec)
    return bool(preferred) and prepared.index.capacity(spec.gpus_per_worker, False, preferred) >= spec.workers


def _packing(prepared: PreparedPool, spec: WorkloadSpec) -> tuple[bool, str]:
    """What the gang is packed within: the required grouping, or the preferred level where
    this pool holds the gang in one of its domains now."""
    same, level = prepared.grouping(spec) or (False, "")
    if _keeps_preferred(prepared, spec):
        return same, prepared.preferred_level(spec)
    return same, level


def _detail(entry: Entry, spec: WorkloadSpec, penalty: float = 0.0) -> dict[str, float | str]:
    out: dict[str, float | str] = {}
    if spec.level_preferred:
        own = entry.prepared.preferred_level(spec)
        name = spec.level_preferred if own in ("", spec.level_preferred) else f"{spec.level_preferred} ({own})"
        kept = _keeps_preferred(entry.prepared, spec)
        out["topology"] = (
            f"in one {name}"
            if kept
            else f"not in one {name}: "
            + ("no such level here" if not own else "no domain holds the gang now")
            + f" (score +{penalty:g})"
        )
    if spec.data_size_gb and entry.remote:
        out.update(
            staging_s=round(spec.data_size_gb * entry.stage_per_gb, 1),
            data_from=entry.source or "unknown owner",
            egress_per_gb=entry.egress,
        )
    return out


def queue_candidates(
    fleet: PreparedFleet,
    spec: WorkloadSpec,
    *,
    tenant: str,
    quota_remaining: int,
    now: datetime,
    age_s: float = 0.0,
    runtime_hours: float | None = None,
    cloud_quota_remaining: int | None = None,
    scopes: Sequence[str] = (),
) -> list[Candidate]:
    """The pools where the whole gang could wait in the local queue: every rule of
    ``place_prepared`` holds except that it fits now (free GPUs, local quota used up now,
    a pool held for another gang); the pool must hold it when idle.  Ranked by the same
    terms, with no nodes assigned."""
    out = _quota_exclusions(fleet, spec, quota_remaining, cloud_quota_remaining)
    stale = fleet.stale(now)
    closed = fleet.off_peak_closed(spec, now)  # its local queue could start it at peak
    entries: list[Entry] = []
    for entry in fleet.static_for(spec, tenant).entries:
        if entry.cluster in out or entry.cluster in stale or entry.cluster in closed:
            continue
        limits = fleet.clusters[entry.cluster].limits
        if limits and admission.never_admitted(limits, entry.prepared.pool, spec, scopes) is not None:
            continue
        if entry.prepared.ever_capacity(spec) >= spec.workers:
            entries.append(entry)
    weights = terms.aged_weights(fleet.policy.weights, age_s, fleet.policy.aging)
    return _rank(entries, spec, weights, runtime_hours, None, assign=False, waits=_scoped_waits(fleet, entries, scopes))


def _result(
    ranked: list[Candidate], excluded: dict[str, Exclusion], policy: Policy, weights: Mapping[str, float]
) -> PlacementResult:
    return PlacementResult(
        ranked=ranked,
        excluded=excluded,
        reason="" if ranked else no_fit_reason(excluded),
        policy_version=policy.version,
        weights=dict(weights),
    )
