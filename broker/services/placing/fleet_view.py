"""The fleet as placement sees it: each cluster's stored report, with what the broker has
promised since (``capacity_selectors.promised_gpus``) taken off the nodes and added to the
local quotas' use, and the cluster's local limits."""

from __future__ import annotations

from typing import Mapping, Sequence

from broker.backends.base import InventorySnapshot, NodeInventory, PoolInventory, QueueStats
from broker.local_limits import LocalLimits, add_use
from broker.selectors.capacity import Promised, promised_gpus
from broker.models import Cluster, GpuPool
from portal.tenancy.models import Project


def fleet_snapshots(pools_by_cluster: Mapping[Cluster, Sequence[GpuPool]]) -> list[InventorySnapshot]:
    """One snapshot per cluster with pools; one query for the promises of all of them."""
    clusters = [c for c, pools in pools_by_cluster.items() if pools]
    taken = {(c.id, p.name): p.taken_at for c in clusters for p in pools_by_cluster[c]}
    promised = promised_gpus(cluster_ids=[c.id for c in clusters], taken_at=taken)
    return [snapshot_of(c, pools_by_cluster[c], promised[c.id]) for c in clusters]


def snapshot_of(cluster: Cluster, pools: Sequence[GpuPool], promised: Promised) -> InventorySnapshot:
    taken_at = min(p.taken_at for p in pools)
    out = []
    for pool in pools:
        nodes = tuple(
            NodeInventory.from_json(
                n,
                gpu_model=pool.gpu_model,
                gpu_memory_gb=pool.gpu_memory_gb,
                partitioning=pool.partitioning,
                owner=pool.owner,
                promised=promised.nodes,
            )
            for n in pool.nodes
        )
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
    )
    limits = add_use(LocalLimits.from_json(cluster.local_limits), dict(promised.pools), promised.jobs)
    return InventorySnapshot(cluster=cluster.name, taken_at=taken_at, pools=tuple(out), queue=queue, limits=limits)


def identity_scopes(project: Project) -> tuple[str, ...]:
    """The accounts and queues a project's jobs run under, for limits of one account only."""
    return tuple(s for s in (project.slurm_account, project.k8s_namespace, project.k8s_queue) if s)
