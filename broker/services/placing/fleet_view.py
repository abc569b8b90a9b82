"""The fleet as placement sees it: each cluster's stored report, with what the broker has
promised since (``capacity_selectors.promised_gpus``) taken off the nodes and added to the
local quotas' use, and the cluster's local limits."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Mapping, Sequence

from broker.backends.base import InventorySnapshot, NodeInventory, PoolInventory, QueueStats
from broker.elastic_pools import registered_pools
from broker.local_limits import LocalLimits, add_use
from broker.selectors.capacity import Promised, promised_gpus
from broker.selectors.node_blocks import NodeBlock, blocked_nodes, held_back
from broker.models import Cluster, ClusterHealth, GpuPool
from broker.placement import ClusterFacts, Exclusion
from portal.tenancy.models import Project


def fleet_snapshots(pools_by_cluster: Mapping[Cluster, Sequence[GpuPool]]) -> list[InventorySnapshot]:
    """One snapshot per cluster with pools; one query for the promises of all of them."""
    clusters = [c for c, pools in pools_by_cluster.items() if pools]
    taken = {(c.id, p.name): p.taken_at for c in clusters for p in pools_by_cluster[c]}
    promised = promised_gpus(cluster_ids=[c.id for c in clusters], taken_at=taken)
    blocked = blocked_nodes()
    return [snapshot_of(c, pools_by_cluster[c], promised[c.id], blocked.get(c.id, {})) for c in clusters]


def snapshot_of(
    cluster: Cluster, pools: Sequence[GpuPool], promised: Promised, blocked: Mapping[str, NodeBlock] | None = None
) -> InventorySnapshot:
    """``blocked``: nodes the broker holds back (``selectors.node_blocks``), out of service here."""
    taken_at = min(p.taken_at for p in pools)
    out = []
    for pool in pools:
        nodes = tuple(held_back(n, blocked or {}) for n in pool.node_inventories(promised.nodes))
        nodes += provisionable(cluster, pool)
        out.append(
            PoolInventory(
                name=pool.name,
                gpu_model=pool.gpu_model,
                gpu_memory_gb=pool.gpu_memory_gb,
                partitioning=pool.partitioning,
                owner=pool.owner,
                nodes=nodes,
            )
        )
    queue = QueueStats(
        pending_jobs=cluster.queue_pending_jobs,
        pending_gpus=cluster.queue_pending_gpus,
        gpu_hours_per_hour=cluster.throughput_gpu_hours_per_hour,
        pending_gpus_by_scope=_by_scope(cluster),
    )
    limits = add_use(LocalLimits.from_json(cluster.local_limits), dict(promised.pools), promised.jobs)
    return InventorySnapshot(cluster=cluster.name, taken_at=taken_at, pools=tuple(out), queue=queue, limits=limits)


def provisionable(cluster: Cluster, pool: GpuPool) -> tuple[NodeInventory, ...]:
    """An elastic pool's nodes that its report does not list (a real cluster lists only the
    nodes that exist): free, "available", up to its maximum."""
    elastic = registered_pools(cluster.config).get(pool.name)
    if elastic is None:
        return ()
    missing = elastic.max_nodes - len(pool.nodes)
    return tuple(
        NodeInventory(
            name=f"{pool.name}-provisionable-{i + 1:02d}",
            gpu_model=pool.gpu_model,
            gpu_memory_gb=pool.gpu_memory_gb,
            gpus_total=elastic.gpus_per_node,
            gpus_allocatable=elastic.gpus_per_node,
            gpus_allocated=0,
            partitioning=pool.partitioning,
            owner=pool.owner,
            provisioning="available",
        )
        for i in range(max(0, missing))
    )


def _by_scope(cluster: Cluster) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((str(a), int(g)) for a, g in (cluster.queue_pending_by_scope or {}).items()))


def identity_scopes(project: Project) -> tuple[str, ...]:
    """The accounts and queues a project's jobs run under, for limits of one account only."""
    return tuple(s for s in (project.slurm_account, project.k8s_namespace, project.k8s_queue) if s)


def cluster_facts(cluster: Cluster) -> ClusterFacts:
    cfg = cluster.config or {}
    return ClusterFacts(
        name=cluster.name,
        kind=cluster.kind if cluster.kind in ("slurm", "kueue", "volcano") else "simulator",
        one_worker_per_node=cluster.kind == "slurm"
        or (cluster.kind == "simulator" and cfg.get("flavor", "slurm") == "slurm"),
        region=cluster.region,
        location=cluster.location,
        price_per_gpu_hour=float(cluster.price_per_gpu_hour),
        egress_per_gb=float(cluster.egress_per_gb),
        egress_by_region={str(k): float(v) for k, v in cfg.get("egress_by_region", {}).items()},
        bandwidth_gbps=dict(cfg.get("bandwidth_gbps", {})),
        default_bandwidth_gbps=float(cfg.get("default_bandwidth_gbps", 1.0)),
        image_pull_s=float(cfg.get("image_pull_s", 60.0)),
        provisioning_s=float(cfg.get("provisioning_s", 0.0)),
        healthy=True,
        draining=cluster.draining,
        data_locations=tuple(cfg.get("data_locations", ())),
        node_domain=str(cfg.get("node_domain", "")),
        idle_release_s={name: p.idle_release_s for name, p in registered_pools(cluster.config).items()},
    )


def fleet_inputs(
    *, rejections: dict[str, str], now: datetime
) -> tuple[list[InventorySnapshot], dict[str, ClusterFacts], dict[str, Exclusion]]:
    snapshots: list[InventorySnapshot] = []
    facts: dict[str, ClusterFacts] = {}
    excluded: dict[str, Exclusion] = {}
    pools_by_cluster: dict[int, list[GpuPool]] = defaultdict(list)
    with_pools: dict[Cluster, list[GpuPool]] = {}
    for pool in GpuPool.objects.filter(cluster__enabled=True):
        pools_by_cluster[pool.cluster_id].append(pool)
    for cluster in Cluster.objects.filter(enabled=True):
        if (cluster.config or {}).get("dispatcher"):
            continue  # a MultiKueue manager in dispatcher mode: its workers are the destinations
        if cluster.name in rejections:
            excluded[cluster.name] = Exclusion("rejected", f"rejected it: {rejections[cluster.name]}")
            continue
        facts[cluster.name] = cluster_facts(cluster)
        if cluster.health == ClusterHealth.STALE:
            since = (now - cluster.stale_since).total_seconds() if cluster.stale_since else 0
            excluded[cluster.name] = Exclusion(
                "stale", f"stopped answering {since:.0f}s ago ({cluster.last_error[:200]}); stale is not idle"
            )
        elif pools_by_cluster.get(cluster.id):
            with_pools[cluster] = pools_by_cluster[cluster.id]
    snapshots = fleet_snapshots(with_pools)
    return snapshots, facts, excluded
