"""The fleet's own recent history, as the trace replay's jobs, and the fleet as it stands.

Reads only.  Each workload submitted in the window becomes one ReplayJob with its real
spec (class, GPUs per worker, workers, memory), its arrival time and the run time its
cluster reported; one that never ran is replayed for its time limit (what it asked for).
Clusters come from the fleet file where they are described there (simulated ones), and
otherwise from their pools' last inventory (node groups by model and GPUs per node).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from broker.backends.base import JobState
from broker.backends.sim.model import NodeGroup, Partition
from broker.fleet_file import ClusterDescription, FleetDescription, FleetError, load_fleet
from broker.models import Cluster, Workload, WorkloadState
from broker.replay.jobs import MAX_TIME_LIMIT_MIN, TENANT_PREFIX, ReplayJob

WINDOW_DAYS = 30
_FLAVOR = {"slurm": "slurm", "kueue": "kueue", "multikueue": "kueue", "volcano": "volcano"}


def recent_jobs(*, now: datetime, days: int = WINDOW_DAYS) -> list[ReplayJob]:
    query = (
        Workload.objects.filter(created_at__gte=now - timedelta(days=days), gpu_class__isnull=False)
        .exclude(tenant__slug__startswith=TENANT_PREFIX)
        .select_related("tenant", "gpu_class")
        .order_by("created_at", "id")
    )
    rows = list(query)
    if not rows:
        return []
    origin = rows[0].created_at
    return [_job(w, origin, now) for w in rows]


def _job(w: Workload, origin: datetime, now: datetime) -> ReplayJob:
    spec = w.spec or {}
    limit_s = min(int(spec.get("time_limit_minutes") or 60), MAX_TIME_LIMIT_MIN - 1) * 60
    if w.run_seconds is not None:
        duration = w.run_seconds
    elif w.started_at is not None:
        duration = ((w.ended_at or now) - w.started_at).total_seconds()
    else:
        duration = limit_s
    final = JobState.FAILED if w.state == WorkloadState.FAILED else JobState.COMPLETED
    assert w.gpu_class is not None  # recent_jobs reads only workloads with a class
    return ReplayJob(
        key=f"w{w.id}",
        submit_s=float(round((w.created_at - origin).total_seconds())),
        tenant=w.tenant.slug,
        gpu_class=w.gpu_class.slug,
        min_memory_gb=int(spec.get("min_gpu_memory_gb") or w.gpu_class.min_memory_gb),
        gpus_per_worker=int(spec.get("gpus_per_worker") or 1),
        workers=int(spec.get("workers") or 1),
        duration_s=float(max(1, min(round(duration), limit_s))),
        final_state=final,
    )


def current_fleet() -> FleetDescription:
    """Enabled, not draining clusters."""
    described: dict[str, ClusterDescription] = {}
    try:
        described = {c.name: c for c in load_fleet(settings.GPUBROKER_FLEET_FILE).clusters}
    except FleetError:
        pass  # a site without a fleet file: every cluster from its inventory
    out = []
    for cluster in Cluster.objects.filter(enabled=True, draining=False).prefetch_related("pools"):
        desc = described.get(cluster.name) or _from_inventory(cluster)
        if desc is not None:
            out.append(desc)
    return FleetDescription(clusters=tuple(out), source="current fleet")


def _from_inventory(cluster: Cluster) -> ClusterDescription | None:
    simulated = cluster.config.get("flavor", "slurm") if cluster.kind == "simulator" else None
    flavor = _FLAVOR.get(cluster.kind) or simulated
    groups: Counter = Counter()
    for pool in cluster.pools.all():
        for node in pool.node_inventories():
            if node.healthy and node.gpus_total:
                groups[
                    (
                        pool.gpu_model,
                        pool.gpu_memory_gb,
                        int(node.gpus_total),
                        pool.partitioning,
                        pool.name if flavor == "slurm" else "",
                    )
                ] += 1
    if flavor is None or not groups:
        return None
    node_groups = tuple(
        NodeGroup(
            count=n,
            gpu_model=m,
            gpu_memory_gb=mem,
            gpus_per_node=per,
            partitioning=part,
            partition=p,
            name_prefix=f"g{i}-",
        )
        for i, ((m, mem, per, part, p), n) in enumerate(sorted(groups.items()))
    )
    partitions = tuple(
        Partition(name=p, default=(i == 0))
        for i, p in enumerate(sorted({g.partition for g in node_groups if g.partition}))
    )
    return ClusterDescription(
        name=cluster.name,
        kind=flavor,
        flavor=flavor,
        region=cluster.region,
        location=cluster.location,
        price_per_gpu_hour=float(cluster.price_per_gpu_hour),
        egress_per_gb=float(cluster.egress_per_gb),
        image_pull_s=float(cluster.config.get("image_pull_s", 0)),
        provisioning_s=float(cluster.config.get("provisioning_s", 0)),
        data_locations=tuple(cluster.config.get("data_locations", ())),
        node_groups=node_groups,
        partitions=partitions,
    )


# --- to and from JSON (the replay runs in a child process) ------------------------------


def jobs_to_json(jobs: list[ReplayJob]) -> list[dict[str, Any]]:
    return [{**asdict(j), "final_state": j.final_state.value} for j in jobs]


def jobs_from_json(rows: list[dict[str, Any]]) -> list[ReplayJob]:
    return [ReplayJob(**{**r, "final_state": JobState(r["final_state"])}) for r in rows]


def fleet_to_json(fleet: FleetDescription) -> list[dict[str, Any]]:
    return [asdict(c) for c in fleet.clusters]


def fleet_from_json(rows: list[dict[str, Any]]) -> FleetDescription:
    clusters = []
    for r in rows:
        clusters.append(
            ClusterDescription(
                **{
                    **r,
                    "data_locations": tuple(r["data_locations"]),
                    "node_groups": tuple(NodeGroup(**g) for g in r["node_groups"]),
                    "partitions": tuple(Partition(**p) for p in r["partitions"]),
                }
            )
        )
    return FleetDescription(clusters=tuple(clusters), source="current fleet")
