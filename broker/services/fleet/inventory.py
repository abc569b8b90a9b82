"""Inventory sync: what each cluster reports, kept per pool with its report time.

A cluster that does not answer is marked stale, never idle: its pools keep
their last numbers and their taken_at, and placement refuses them for age.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import Mapping

from django.db import transaction

from broker.backends.base import InventorySnapshot, Unavailable
from broker.backends.registry import backend_for
from broker.selectors.capacity import promised_gpus
from broker.selectors.node_blocks import NodeBlock, blocked_nodes, held_back
from broker.models import Cluster, ClusterHealth, EscalationKind, GpuPool
from broker.services.records.audit import audit
from broker import runtime
from broker.services.following.escalations import escalation_open


def cluster_sync_inventory(*, cluster_id: int) -> Cluster:
    cluster = Cluster.objects.get(id=cluster_id)
    try:
        snapshot = backend_for(cluster).inventory()
    except Unavailable as exc:
        cluster_mark_stale(cluster=cluster, error=str(exc))
        return Cluster.objects.get(id=cluster_id)
    inventory_store(cluster=cluster, snapshot=snapshot)
    _escalate_double_claims(cluster, snapshot)
    return Cluster.objects.get(id=cluster_id)


def cluster_mark_stale(*, cluster: Cluster, error: str) -> None:
    now = runtime.now()
    with transaction.atomic():
        if (
            Cluster.objects.filter(id=cluster.id)
            .exclude(health=ClusterHealth.STALE)
            .update(health=ClusterHealth.STALE, stale_since=now, last_error=error[:2000])
        ):
            audit(
                action="cluster.stale",
                cluster=cluster.name,
                message=f"no answer: {error}; no new placements, its jobs are left as they were",
            )
        else:
            Cluster.objects.filter(id=cluster.id).update(last_error=error[:2000])


@transaction.atomic
def inventory_store(*, cluster: Cluster, snapshot: InventorySnapshot) -> None:
    snapshot = _with_blocks(snapshot, blocked_nodes().get(cluster.id, {}))
    # what the broker promised since this report was taken: the same read placement uses
    promised = promised_gpus(
        cluster_ids=[cluster.id], taken_at={(cluster.id, p.name): snapshot.taken_at for p in snapshot.pools}
    )[cluster.id]
    reserved = promised.pools
    before = {_key(p): _numbers(p) for p in GpuPool.objects.filter(cluster=cluster)}
    after: dict[tuple[str, str, str], tuple[object, ...]] = {}
    keep: list[int] = []
    for pool in snapshot.pools:
        allocatable, allocated = pool.gpus_allocatable, pool.gpus_allocated
        held = min(reserved.get(pool.name, 0), max(0, allocatable - allocated))
        row, _ = GpuPool.objects.update_or_create(
            cluster=cluster,
            name=pool.name,
            gpu_model=pool.gpu_model,
            partitioning=pool.partitioning,
            defaults=dict(
                gpu_memory_gb=pool.gpu_memory_gb,
                owner=pool.owner,
                gpus_total=pool.gpus_total,
                gpus_allocatable=allocatable,
                gpus_allocated=allocated,
                gpus_reserved=held,
                gpus_idle=max(0, pool.gpus_free - held),
                nodes=[n.to_json() for n in pool.nodes],
                taken_at=snapshot.taken_at,
            ),
        )
        keep.append(row.id)
        after[_key(row)] = _numbers(row)  # as written: no second read
    GpuPool.objects.filter(cluster=cluster).exclude(id__in=keep).delete()
    was_stale = cluster.health == ClusterHealth.STALE
    changed = after != before or cluster.local_limits != snapshot.limits.to_json()
    Cluster.objects.filter(id=cluster.id).update(
        capacity_changed_at=runtime.now() if changed else cluster.capacity_changed_at,
        health=ClusterHealth.DRAINING if cluster.draining else ClusterHealth.HEALTHY,
        last_inventory_at=snapshot.taken_at,
        stale_since=None,
        last_error="",
        queue_pending_jobs=snapshot.queue.pending_jobs,
        queue_pending_gpus=snapshot.queue.pending_gpus,
        queue_pending_by_scope=dict(snapshot.queue.pending_gpus_by_scope),
        throughput_gpu_hours_per_hour=snapshot.queue.gpu_hours_per_hour,
        local_limits=snapshot.limits.to_json(),
    )
    if was_stale:
        audit(action="cluster.fresh", cluster=cluster.name, message="answering again")


def _key(pool: GpuPool) -> tuple[str, str, str]:
    return (pool.name, pool.gpu_model, pool.partitioning)


def _numbers(pool: GpuPool) -> tuple[object, ...]:
    """What placement reads of a pool, without the report's time."""
    return (
        pool.gpus_total,
        pool.gpus_allocatable,
        pool.gpus_allocated,
        pool.gpus_reserved,
        pool.gpus_idle,
        pool.nodes,
        pool.owner,
    )


def _escalate_double_claims(cluster: Cluster, snapshot: InventorySnapshot) -> None:

    owners: dict[str, set[str]] = defaultdict(set)
    for pool in snapshot.pools:
        for node in pool.nodes:
            owners[node.name].add(node.owner or pool.owner)
    for node_name, claimed_by in sorted(owners.items()):
        if len(claimed_by) > 1:
            escalation_open(
                kind=EscalationKind.DOUBLE_CLAIM,
                key=f"double:{cluster.name}:{node_name}",
                cluster=cluster,
                evidence={
                    "node": node_name,
                    "claimed_by": sorted(claimed_by),
                    "taken_at": snapshot.taken_at.isoformat(),
                },
            )


def _with_blocks(snapshot: InventorySnapshot, blocks: Mapping[str, NodeBlock]) -> InventorySnapshot:
    """The report with the nodes the broker holds back out of service (``node_blocks``)."""
    if not blocks:
        return snapshot
    pools = tuple(replace(p, nodes=tuple(held_back(n, blocks) for n in p.nodes)) for p in snapshot.pools)
    return replace(snapshot, pools=pools)
