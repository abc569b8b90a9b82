"""The placement filters, one function per rule.

Each returns an ``Exclusion`` naming its rule, or None when the candidate passes.  They
are pure and cheap; ``fleet`` runs the static ones once per request shape and caches the
outcome, so only quota, freshness and topology run per decision.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from broker.cluster_report import PoolInventory
from broker.placement.facts import ClusterFacts, region_matches
from broker.placement.packing import PoolIndex
from broker.placement.policy import GpuClass, Policy, TenantPolicy, model_key
from broker.placement.results import Exclusion
from broker.spec import PARTITIONING_SHARED, PARTITIONING_WHOLE, WorkloadSpec, partitioning_serves


@dataclass(frozen=True)
class Request:
    """The parts of a spec (plus tenant) that the static filters read."""

    tenant: TenantPolicy
    gpu_class_name: str
    gpu_class: GpuClass | None  # None when unset or not defined in the policy
    model_keys: frozenset[str]  # spec.gpu_models, normalised
    min_unit_memory_gb: int
    partitioning: str
    residency: tuple[str, ...]
    data_location: str
    shares_per_worker: int = 0  # a job of GPU shares: each worker's, which one GPU must hold

    @property
    def wanted(self) -> str:
        parts = [f"class {self.gpu_class_name}"] if self.gpu_class_name else []
        parts += sorted(self.model_keys)
        return " or ".join(parts) or "no GPU"


def make_request(spec: WorkloadSpec, tenant: str, policy: Policy) -> Request:
    return Request(
        tenant=policy.tenant(tenant),
        gpu_class_name=spec.gpu_class,
        gpu_class=policy.gpu_classes.get(spec.gpu_class) if spec.gpu_class else None,
        model_keys=frozenset(model_key(m) for m in spec.gpu_models),
        min_unit_memory_gb=spec.min_gpu_memory_gb,
        partitioning=spec.partitioning.lower(),
        residency=spec.residency,
        data_location=spec.data_location,
        shares_per_worker=spec.gpus_per_worker if spec.gpu_share else 0,
    )


def unit_memory_gb(pool: PoolInventory) -> int:
    """Memory one allocatable unit offers: the whole GPU, or the MIG slice ('3g.40gb')."""
    if pool.partitioning.lower() == PARTITIONING_WHOLE:
        return pool.gpu_memory_gb
    try:
        return int(pool.partitioning.lower().split(".")[1].removesuffix("gb"))
    except (IndexError, ValueError):
        return 0


def filter_policy(
    req: Request, facts: ClusterFacts, pool: PoolInventory, pool_classes: tuple[str, ...]
) -> Exclusion | None:
    """The tenant may use this region, the class it asked for and the pool's class."""
    tenant = req.tenant
    if not tenant.allows_region(facts.region):
        return Exclusion("policy", f"tenant {tenant.name or '?'} may not use region {facts.region or '(none)'}")
    if req.gpu_class_name and req.gpu_class is None and not req.model_keys:
        return Exclusion("policy", f"GPU class {req.gpu_class_name} is not defined by the policy")
    if req.gpu_class_name and not tenant.allows_class(req.gpu_class_name):
        return Exclusion("policy", f"tenant {tenant.name or '?'} may not use GPU class {req.gpu_class_name}")
    if not tenant.allows_any_class(pool_classes):
        return Exclusion(
            "policy",
            f"tenant {tenant.name or '?'} may not use {pool.gpu_model} "
            f"(pool {pool.name}, class {', '.join(pool_classes) or 'none'})",
        )
    return None


def filter_quota(total_gpus: int, quota_remaining: int) -> Exclusion | None:
    """The tenant's remaining global quota for the class must cover the whole gang."""
    if quota_remaining < total_gpus:
        return Exclusion(
            "quota", f"needs {total_gpus} GPUs, {max(quota_remaining, 0)} left in the tenant's global quota"
        )
    return None


def _in_class(req: Request, key: str) -> bool:
    return req.gpu_class is not None and key in req.gpu_class.model_keys


def filter_gpu_compat(req: Request, pool: PoolInventory) -> Exclusion | None:
    """The pool's model is a member of the requested class or an accepted model."""
    key = model_key(pool.gpu_model)
    if _in_class(req, key) or key in req.model_keys:
        return None
    return Exclusion("gpu_compat", f"pool {pool.name} has {pool.gpu_model}, wanted {req.wanted}")


def filter_gpu_memory(req: Request, pool: PoolInventory) -> Exclusion | None:
    """Class minimum on the physical GPU; the spec's minimum on the unit (GPU or slice)."""
    key = model_key(pool.gpu_model)
    if (
        _in_class(req, key)
        and key not in req.model_keys
        and req.gpu_class is not None
        and pool.gpu_memory_gb < req.gpu_class.min_memory_gb
    ):
        return Exclusion(
            "gpu_memory",
            f"pool {pool.name} GPUs have {pool.gpu_memory_gb} GB, "
            f"class {req.gpu_class_name} needs {req.gpu_class.min_memory_gb} GB",
        )
    unit = unit_memory_gb(pool)
    if unit < req.min_unit_memory_gb:
        return Exclusion(
            "gpu_memory", f"pool {pool.name} offers {unit} GB per GPU, the job needs {req.min_unit_memory_gb} GB"
        )
    return None


def filter_partitioning(req: Request, pool: PoolInventory) -> Exclusion | None:
    """A MIG profile needs a pool of exactly that profile; whole GPUs need a whole pool; GPU
    shares need a pool of shares (time-slicing, MPS, Slurm shards)."""
    if partitioning_serves(pool.partitioning, req.partitioning):
        # a worker's shares come from one GPU (Slurm allots shards of one GPU to a job's node)
        if req.shares_per_worker > pool.units_per_gpu:
            return Exclusion(
                "partitioning",
                f"pool {pool.name} splits a GPU into {pool.units_per_gpu} shares; a worker asks "
                f"{req.shares_per_worker}, more than one GPU holds",
            )
        return None
    if req.partitioning == PARTITIONING_SHARED:
        words = f"pool {pool.name} offers {pool.partitioning} GPUs, the job asks for GPU shares"
        return Exclusion("partitioning", words)
    return Exclusion(
        "partitioning", f"pool {pool.name} offers {pool.partitioning} GPUs, the job needs {req.partitioning}"
    )


def filter_residency(req: Request, facts: ClusterFacts) -> Exclusion | None:
    if not req.residency or region_matches(facts.region, req.residency):
        return None
    return Exclusion(
        "residency", f"region {facts.region or '(none)'} is outside the job's residency {', '.join(req.residency)}"
    )


def filter_data_access(req: Request, facts: ClusterFacts) -> Exclusion | None:
    """Data must be local or reachable for staging (a bandwidth of 0 means no route)."""
    if facts.data_is_local(req.data_location) or facts.bandwidth_to(req.data_location) > 0:
        return None
    return Exclusion("data_access", f"cannot reach data at {req.data_location}")


def filter_health(facts: ClusterFacts) -> Exclusion | None:
    if not facts.healthy:
        return Exclusion("health", f"cluster {facts.name} is marked unhealthy")
    if facts.draining:
        return Exclusion("draining", f"cluster {facts.name} is draining: no new work")
    return None


def filter_freshness(taken_at: datetime | None, now: datetime, limit_s: float) -> Exclusion | None:
    """Stale is not idle: an old report says nothing about free GPUs now."""
    if taken_at is None:
        return Exclusion("stale", "no inventory report from this cluster")
    if (taken_at.tzinfo is None) != (now.tzinfo is None):
        # one side naive: read it as UTC rather than fail the whole decision
        taken_at, now = _as_utc(taken_at), _as_utc(now)
    age = (now - taken_at).total_seconds()
    if age > limit_s:
        return Exclusion("stale", f"inventory is {age:.0f}s old (limit {limit_s:.0f}s)")
    return None


def _as_utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment


def filter_ownership(pool: PoolInventory, usable_nodes: int, conflicted: tuple[str, ...]) -> Exclusion | None:
    """Nodes claimed by two schedulers are left out; only if none remain is the pool out."""
    if conflicted and usable_nodes == 0:
        return Exclusion(
            "ownership", f"pool {pool.name}: every node is claimed by two schedulers ({', '.join(conflicted[:5])})"
        )
    return None


def filter_topology(
    pool_name: str,
    index: PoolIndex,
    idle_capacity: int,
    spec: WorkloadSpec,
    blocked_by: str = "",
    conflicted: int = 0,
    ever_capacity: int | None = None,
    *,
    want: tuple[bool, str] | None,
) -> Exclusion | None:
    """The whole gang fits in this pool now, each worker on one node (and one
    interconnect domain, or one domain of the level it requires, when asked).
    ``idle_capacity``: workers of this shape the pool could host if all its allocatable
    GPUs were free (tells 'wait' from 'never'); ``ever_capacity``: the same with every node
    back in service.  Only a gang larger than that is 'never_fits' (the job is rejected):
    nodes that are down may come back.  ``want``: ``PreparedPool.grouping``; None where the
    cluster describes no level of the name the spec requires."""
    g, w = spec.gpus_per_worker, spec.workers
    if blocked_by:
        return Exclusion("topology", f"pool {pool_name} is held for waiting gang {blocked_by}")
    if want is None:
        known = ", ".join(sorted(index.level_domains))
        return Exclusion(
            "never_fits",
            f"pool {pool_name}: the cluster describes no {spec.level_required} level (its levels: {known})",
        )
    same, level = want
    fits = index.capacity(g, same, level)
    if fits >= w:
        return None
    where = (
        f"in one {_level_words(spec.level_required, level)} "
        if level
        else "in one interconnect domain "
        if same
        else ""
    )
    note = f"; {conflicted} node(s) left out, claimed by two schedulers" if conflicted else ""
    if idle_capacity < w:
        ever = idle_capacity if ever_capacity is None else ever_capacity
        rule = "never_fits" if ever < w and not conflicted else "topology"
        return Exclusion(
            rule,
            f"pool {pool_name} can never hold {w} x {g} GPUs "
            f"{where}(at most {idle_capacity} workers even when idle{note})",
        )
    free = index.all.cap[1]
    split = ", but split across nodes" if free >= spec.total_gpus else ""
    return Exclusion(
        "topology",
        f"pool {pool_name}: {fits} of {w} workers of {g} GPUs fit {where}now ({free} GPUs free{split}{note})",
    )


def _level_words(asked: str, own: str) -> str:
    """'rack', or 'rack (tier 1)' where the cluster's own name for it differs."""
    return asked if asked == own else f"{asked} ({own})"
