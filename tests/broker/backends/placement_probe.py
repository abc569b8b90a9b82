"""What the broker's placement makes of one pool a real control plane reported, for the tests
that compare the broker's choice with the scheduler's: the pool alone, as a cluster of its
own, through the placement engine itself (not a copy of its rules)."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

from broker.cluster_report import InventorySnapshot, PoolInventory, QueueStats
from broker.placement import ClusterFacts, Policy, PreparedFleet
from broker.placement.engine import place_prepared
from broker.spec import WorkloadSpec


def placement_of(
    pool: PoolInventory, spec: WorkloadSpec, *, one_worker_per_node: bool = False
) -> tuple[str, list[str]]:
    """The rule and the words of why the gang does not fit now, or the nodes it would take
    (``one_worker_per_node``: a Slurm cluster, where each worker takes a node)."""
    now = datetime.now(timezone.utc)
    facts = ClusterFacts(name="real", region="r", one_worker_per_node=one_worker_per_node)
    fleet = PreparedFleet([InventorySnapshot("real", now, (pool,), QueueStats())], [facts], Policy())
    asked = replace(spec, gpu_class="", gpu_models=(pool.gpu_model,))
    result = place_prepared(fleet, asked, tenant="t", quota_remaining=10_000, now=now)
    if result.best is None:
        exclusion = result.excluded["real"]
        return f"{exclusion.rule}: {exclusion.message}", []
    return "", sorted(result.best.assignment)


def placement_among(pools: dict[str, PoolInventory], spec: WorkloadSpec) -> tuple[str, dict[str, str]]:
    """Several reported pools, each as a cluster of its own (named by the keys): the cluster
    placement chooses ("" for none) and the words of why each other one is left out."""
    now = datetime.now(timezone.utc)
    snaps = [InventorySnapshot(name, now, (pool,), QueueStats()) for name, pool in pools.items()]
    fleet = PreparedFleet(snaps, [ClusterFacts(name=name, region="r") for name in pools], Policy())
    models = tuple(dict.fromkeys(p.gpu_model for p in pools.values()))
    result = place_prepared(fleet, replace(spec, gpu_class="", gpu_models=models), tenant="t",
                            quota_remaining=10_000, now=now)
    chosen = result.best.cluster if result.best else ""
    return chosen, {name: f"{e.rule}: {e.message}" for name, e in result.excluded.items()}
