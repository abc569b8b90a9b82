"""PreparedFleet: the inventory indexed once per refresh, so each decision is cheap.

Building it does the work that does not depend on the individual workload: ownership
conflicts, per-pool gang-capacity tables, per-cluster queue estimates.  The static
filters (policy, hardware, residency, data access, health, ownership) depend only on the
request's shape, which repeats across a pending queue, so their outcome is cached per
shape.  ``take`` records placements made within a pass so they are not double-booked.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Iterable, Mapping, Sequence

from broker.cluster_report import InventorySnapshot, NodeInventory, PoolInventory
from broker.local_limits import NO_LIMITS, LocalLimits, add_use
from broker.placement import filters as f
from broker.placement import terms
from broker.placement import off_peak
from broker.placement.facts import ClusterFacts
from broker.placement.packing import MAX_GPUS_PER_WORKER, PoolIndex, workers_on
from broker.placement.policy import Policy, QueueModel
from broker.placement.results import RULE_RANK, Candidate, Exclusion
from broker.spec import WorkloadSpec
from broker.topology_names import resolve_level

_CACHE_LIMIT = 4096  # request shapes; a pending queue has far fewer


@dataclass(eq=False)
class PreparedPool:
    cluster: str
    pool: PoolInventory
    index: PoolIndex
    node_index: dict[str, int]
    idle_cap: list[int]  # per g: workers the usable nodes hold when idle
    idle_cap_same: list[int]  # the same within one interconnect domain
    ever_cap: list[int]  # per g: the same with every node in service again
    ever_cap_same: list[int]
    conflicted: tuple[str, ...]  # nodes left out: claimed by two schedulers
    classes: tuple[str, ...]
    price: float
    held_by: str = ""  # a waiting gang this pool is held for
    idle_gpus: tuple[int, ...] = ()  # per usable node: GPUs it would have free when idle
    ever_gpus: tuple[int, ...] = ()  # the same with the node back in service
    _level_caps: dict[str, tuple[list[int], list[int]]] = field(default_factory=dict)

    def grouping(self, spec: WorkloadSpec) -> tuple[bool, str] | None:
        """What the gang's workers must share here: (one interconnect domain, this pool's
        own name for the level the spec requires, or ""); None where the cluster describes
        no such level (``broker.topology_names``)."""
        if not spec.level_required:
            return spec.one_domain, ""
        level = resolve_level(spec.level_required, self.index.level_domains)
        return None if level is None else (False, level)

    def capacity_now(self, spec: WorkloadSpec) -> int:
        """Workers of the spec's shape the pool hosts now, within what the spec requires them
        to share; 0 where the cluster describes no such level."""
        want = self.grouping(spec)
        return 0 if want is None else self.index.capacity(spec.gpus_per_worker, *want)

    def preferred_level(self, spec: WorkloadSpec) -> str:
        """This pool's own name for the level the spec prefers, or "" where it has none."""
        if not spec.level_preferred:
            return ""
        return resolve_level(spec.level_preferred, self.index.level_domains) or ""

    def idle_capacity(self, spec: WorkloadSpec) -> int:
        return self._capacity(spec, ever=False)

    def ever_capacity(self, spec: WorkloadSpec) -> int:
        return self._capacity(spec, ever=True)

    def _capacity(self, spec: WorkloadSpec, *, ever: bool) -> int:
        want = self.grouping(spec)
        if want is None or not 1 <= spec.gpus_per_worker <= MAX_GPUS_PER_WORKER:
            return 0
        same, level = want
        if level:
            tables = self._level_caps.get(f"{ever}{level}")
            if tables is None:
                gpus = self.ever_gpus if ever else self.idle_gpus
                domains = self.index.level_domains[level]
                tables = self._level_caps[f"{ever}{level}"] = _capacity_tables(domains, gpus, self.index.one_per_node)
            return tables[1][spec.gpus_per_worker]
        if ever:
            return (self.ever_cap_same if same else self.ever_cap)[spec.gpus_per_worker]
        return (self.idle_cap_same if same else self.idle_cap)[spec.gpus_per_worker]


@dataclass(eq=False)
class PreparedCluster:
    name: str
    facts: ClusterFacts | None
    snapshot: InventorySnapshot | None
    pools: list[PreparedPool]
    queue_wait_s: float
    limits: LocalLimits = NO_LIMITS
    autoscaling: bool = False

    def pending_ahead(self, scopes: Sequence[str]) -> int:
        """The GPUs of the local queue that start before a job running under ``scopes``:
        under fair share (Slurm's multifactor priority), only those of accounts whose
        factor is not below its account's; otherwise all of them."""
        if self.snapshot is None:
            return 0
        return self.snapshot.queue.gpus_ahead(self.limits.share_points(), scopes)

    def queue_wait_for(self, scopes: Sequence[str], model: QueueModel) -> float:
        """``queue_wait_s`` for a job running under ``scopes``: the same unless fair share
        puts some of the pending GPUs behind it."""
        if self.snapshot is None or not self.limits.shares:
            return self.queue_wait_s
        queue = self.snapshot.queue
        ahead = self.pending_ahead(scopes)
        if ahead == queue.pending_gpus:
            return self.queue_wait_s
        jobs = queue.pending_jobs if ahead else 0
        return terms.queue_wait_s(replace(queue, pending_gpus=ahead, pending_jobs=jobs), model)


class Entry:
    """A statically eligible pool with the per-cluster constants the ranking needs."""

    __slots__ = (
        "cluster",
        "prepared",
        "queue_wait",
        "start_base",
        "stage_per_gb",
        "price",
        "egress",
        "location",
        "remote",
        "source",
        "tail_h",
    )

    def __init__(
        self,
        cluster: PreparedCluster,
        prepared: PreparedPool,
        req: f.Request,
        policy: Policy,
        source: ClusterFacts | None = None,
    ):
        facts = cluster.facts
        assert facts is not None
        self.cluster = cluster.name
        self.prepared = prepared
        self.queue_wait = cluster.queue_wait_s
        self.start_base = facts.image_pull_s + facts.provisioning_s
        self.stage_per_gb = terms.staging_s_per_gb(facts, req.data_location)
        # a pool of GPU shares charges each unit its share of a GPU's price
        self.price = prepared.price / prepared.pool.units_per_gpu
        # an elastic pool bills its nodes for their idle time after the job (facts.idle_release_s)
        self.tail_h = facts.idle_release_s.get(prepared.pool.name, 0.0) / 3600.0
        local = facts.data_is_local(req.data_location)
        # egress is priced where the data leaves: by the storage's owner, to our region
        self.source = "" if local or source is None else source.name
        self.egress = source.egress_to(facts.region) if self.source and source else 0.0
        self.location = terms.location_penalty(facts, policy.preferred_location)
        self.remote = terms.data_remote(facts, req.data_location)


@dataclass
class StaticResult:
    """The static filters' outcome for one request shape."""

    request: f.Request
    entries: list[Entry] = field(default_factory=list)
    excluded: dict[str, Exclusion] = field(default_factory=dict)


class PreparedFleet:
    def __init__(
        self,
        snapshots: Sequence[InventorySnapshot],
        facts: Iterable[ClusterFacts] | Mapping[str, ClusterFacts],
        policy: Policy,
    ):
        self.policy = policy
        facts_map = dict(facts) if isinstance(facts, Mapping) else {c.name: c for c in facts}
        snaps = {s.cluster: s for s in snapshots}
        self.conflicts = _ownership_conflicts(snaps, facts_map)
        self.sources = _data_sources(facts_map)
        self.clusters: dict[str, PreparedCluster] = {
            name: self._prepare(name, facts_map.get(name), snaps.get(name))
            for name in sorted(set(facts_map) | set(snaps))
        }
        self._static: dict[tuple[object, ...], StaticResult] = {}
        self._stale_now: datetime | None = None
        self._stale: dict[str, Exclusion] = {}

    # -- building -----------------------------------------------------------------
    def _prepare(self, name: str, facts: ClusterFacts | None, snap: InventorySnapshot | None) -> PreparedCluster:
        pools: list[PreparedPool] = []
        if snap is not None:
            domain = facts.ownership_domain if facts else name
            pools = [self._prepare_pool(name, domain, facts, p) for p in sorted(snap.pools, key=lambda p: p.name)]
        wait = terms.queue_wait_s(snap.queue, self.policy.queue) if snap else 0.0
        return PreparedCluster(
            name,
            facts,
            snap,
            pools,
            wait,
            limits=snap.limits if snap else NO_LIMITS,
            autoscaling=name in self.policy.autoscaling,
        )

    def _prepare_pool(self, cluster: str, domain: str, facts: ClusterFacts | None, pool: PoolInventory) -> PreparedPool:
        usable: list[NodeInventory] = []
        conflicted: list[NodeInventory] = []
        for node in sorted(pool.nodes, key=lambda n: n.name):
            (conflicted if (domain, node.name) in self.conflicts else usable).append(node)
        one = facts.one_worker_per_node if facts else False
        names = [n.name for n in usable]
        of_nodes = [dict(n.topology) for n in usable]
        levels = {level: [t.get(level, "") for t in of_nodes] for level in {k for t in of_nodes for k in t}}
        index = PoolIndex(names, [n.gpus_free for n in usable], [n.interconnect_domain for n in usable], one, levels)
        idle = [n.gpus_allocatable if n.healthy and not n.draining else 0 for n in usable]
        ever = [max(n.gpus_allocatable, n.gpus_total) for n in usable]
        idle_cap, idle_cap_same = _capacity_tables(index.domains, idle, one)
        ever_cap, ever_cap_same = _capacity_tables(index.domains, ever, one)
        return PreparedPool(
            cluster=cluster,
            pool=pool,
            index=index,
            node_index={n: i for i, n in enumerate(index.names)},
            idle_cap=idle_cap,
            idle_cap_same=idle_cap_same,
            ever_cap=ever_cap,
            ever_cap_same=ever_cap_same,
            conflicted=tuple(n.name for n in conflicted),
            classes=self.policy.classes_of(pool.gpu_model, pool.gpu_memory_gb),
            price=facts.price_for(pool.name) if facts else 0.0,
            idle_gpus=tuple(idle),
            ever_gpus=tuple(ever),
        )

    # -- the static filters, cached per request shape ------------------------------
    def static_for(self, spec: WorkloadSpec, tenant: str) -> StaticResult:
        key = (
            tenant,
            spec.gpu_class,
            spec.gpu_models,
            spec.min_gpu_memory_gb,
            spec.mig_profile,
            spec.residency,
            spec.data_location,
        )
        found = self._static.get(key)
        if found is None:
            if len(self._static) >= _CACHE_LIMIT:
                self._static.clear()
            found = self._static[key] = self._run_static(f.make_request(spec, tenant, self.policy))
        return found

    def _run_static(self, req: f.Request) -> StaticResult:
        out = StaticResult(req)
        for cluster in self.clusters.values():
            worst: Exclusion | None = None
            eligible = 0
            for prepared in cluster.pools:
                exc = _static_chain(req, cluster, prepared)
                if exc is None:
                    source = self.sources.get(req.data_location, {}).get(cluster.facts.region if cluster.facts else "")
                    out.entries.append(Entry(cluster, prepared, req, self.policy, source))
                    eligible += 1
                elif worst is None or RULE_RANK[exc.rule] > RULE_RANK[worst.rule]:
                    worst = exc  # report the pool that got furthest
            if not eligible:
                out.excluded[cluster.name] = worst or _no_pools(cluster)
        return out

    # -- per-decision helpers ------------------------------------------------------
    def stale(self, now: datetime) -> dict[str, Exclusion]:
        """Clusters whose report is too old at ``now`` (memoised: a pass shares one now)."""
        if now != self._stale_now:
            limit = self.policy.staleness_limit_s
            self._stale = {}
            for name, cluster in self.clusters.items():
                taken = cluster.snapshot.taken_at if cluster.snapshot else None
                exc = f.filter_freshness(taken, now, limit)
                if exc is not None:
                    self._stale[name] = exc
            self._stale_now = now
        return self._stale

    def off_peak_closed(self, spec: WorkloadSpec, now: datetime) -> dict[str, tuple[Exclusion, datetime | None]]:
        """Where an off-peak workload may not start at ``now`` (``placement.off_peak``)."""
        facts = {name: c.facts for name, c in self.clusters.items() if c.facts is not None}
        return off_peak.closed_now(self.policy.off_peak, facts, spec, now)

    def pool(self, cluster: str, pool: str) -> PreparedPool:
        for prepared in self.clusters[cluster].pools:
            if prepared.pool.name == pool:
                return prepared
        raise KeyError(f"{cluster}/{pool}")

    def take(self, candidate: Candidate) -> None:
        """Book a chosen candidate's GPUs so later decisions in this pass see them used."""
        prepared = self.pool(candidate.cluster, candidate.pool)
        nodes = [prepared.node_index[n] for n in candidate.assignment]
        prepared.index.take(nodes, candidate.gpus_per_worker)
        # the local quotas count it too, as a fresh read would count it among the promised
        cluster = self.clusters[candidate.cluster]
        gpus = len(candidate.assignment) * candidate.gpus_per_worker
        cluster.limits = add_use(cluster.limits, {candidate.pool: gpus}, 1)

    def hold(self, cluster: str, pool: str, holder: str) -> None:
        """Keep a pool for a waiting big gang: other workloads treat it as full."""
        self.pool(cluster, pool).held_by = holder

    def release(self, holder: str) -> None:
        for cluster in self.clusters.values():
            for prepared in cluster.pools:
                if prepared.held_by == holder:
                    prepared.held_by = ""


def _static_chain(req: f.Request, cluster: PreparedCluster, prepared: PreparedPool) -> Exclusion | None:
    facts, pool = cluster.facts, prepared.pool
    if facts is None:
        return Exclusion("policy", f"cluster {cluster.name} is not configured in the broker")
    return (
        f.filter_policy(req, facts, pool, prepared.classes)
        or f.filter_gpu_compat(req, pool)
        or f.filter_gpu_memory(req, pool)
        or f.filter_partitioning(req, pool)
        or f.filter_residency(req, facts)
        or f.filter_data_access(req, facts)
        or f.filter_health(facts)
        or f.filter_ownership(pool, len(prepared.index.names), prepared.conflicted)
    )


def _no_pools(cluster: PreparedCluster) -> Exclusion:
    if cluster.snapshot is None:
        return Exclusion("stale", "no inventory report from this cluster")
    if cluster.facts is None:
        return Exclusion("policy", f"cluster {cluster.name} is not configured in the broker")
    return Exclusion("gpu_compat", "the cluster reports no GPU pools")


def _capacity_tables(
    domains: Sequence[str], gpus: Sequence[int], one_per_node: bool = False
) -> tuple[list[int], list[int]]:
    """Per g: workers of g GPUs these nodes hold, in all and within the best domain (one a
    node on Slurm)."""
    by_domain: dict[str, list[int]] = {}
    for node_domain, n in zip(domains, gpus, strict=True):
        by_domain.setdefault(node_domain, []).append(n)
    gs = range(1, MAX_GPUS_PER_WORKER + 1)
    return (
        [0] + [sum(workers_on(x, g, one_per_node) for x in gpus) for g in gs],
        [0]
        + [max((sum(workers_on(x, g, one_per_node) for x in v) for v in by_domain.values()), default=0) for g in gs],
    )


def _data_sources(facts: Mapping[str, ClusterFacts]) -> dict[str, dict[str, ClusterFacts]]:
    """data location -> destination region -> the cheapest owner to pull it from (a
    location listed by several clusters is one store they share)."""
    regions = {c.region for c in facts.values()}
    out: dict[str, dict[str, ClusterFacts]] = {}
    for owner in sorted(facts.values(), key=lambda c: c.name):
        for location in owner.data_locations:
            best = out.setdefault(location, {})
            for region in regions:
                if region not in best or owner.egress_to(region) < best[region].egress_to(region):
                    best[region] = owner
    return out


def _ownership_conflicts(
    snaps: Mapping[str, InventorySnapshot], facts: Mapping[str, ClusterFacts]
) -> dict[tuple[str, str], tuple[str, ...]]:
    """(node domain, node) -> owners, for nodes two different schedulers claim.

    Such a node is an escalation, never capacity: which scheduler would really hand out
    its GPUs is unknown.  An empty owner means 'not reported' and claims nothing."""
    owners: dict[tuple[str, str], set[str]] = {}
    for name, snap in snaps.items():
        domain = facts[name].ownership_domain if name in facts else name
        for pool in snap.pools:
            for node in pool.nodes:
                owner = node.owner or pool.owner
                if owner:
                    owners.setdefault((domain, node.name), set()).add(owner)
    return {k: tuple(sorted(v)) for k, v in owners.items() if len(v) > 1}
