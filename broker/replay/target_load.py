"""Scale a fleet's on-prem nodes so that a replay's jobs put a chosen load on them.

The on-prem load of a job list on a fleet: the GPU-seconds of the jobs arriving in the busy
window (5th-95th percentile of arrivals, ``metrics.busy_window``) per second of the window,
over the fleet's on-prem whole GPUs.  Time compression changes the numerator; this changes
the denominator, so a sweep can hold the load fixed across traces and compressions.

Only on-prem groups of whole GPUs change, in whole nodes: the cloud is what bursting buys, so
it stays as described, and no replayed job uses MIG slices.  Every scaled group keeps enough
nodes for the largest gang that packed on it as described (a gang that could run there must
still be able to), and at least one node.  Nodes are added one at a time to the group whose
share of the described fleet is least met (Webster's rounding: proportional in whole nodes),
stopping at the node count whose load is closest to the target.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

from broker.backends.sim.cluster import request_from_spec
from broker.backends.sim.model import NodeGroup
from broker.backends.sim.placement import matching_pools
from broker.fleet_file import ClusterDescription, FleetDescription
from broker.replay.jobs import ReplayJob
from broker.replay.metrics import offered_load
from broker.replay.simview import spec_for

Key = tuple[int, int]  # (cluster index, node group index) in the fleet
# a target that asks for more on-prem GPUs than this is a typo (0.009 for 0.9), not a fleet
MAX_ONPREM_GPUS = 100_000


@dataclass(frozen=True)
class GroupChange:
    cluster: str
    pool: str
    gpus_per_node: int
    before: int  # nodes as described
    after: int  # nodes in the scaled fleet


@dataclass(frozen=True)
class LoadScaling:
    target: float
    achieved: float
    offered_gpus: float  # GPUs the busy window's jobs keep busy, on average over it
    onprem_gpus_before: int
    onprem_gpus: int
    changes: tuple[GroupChange, ...]
    fleet: FleetDescription  # the fleet the replay runs on

    def describe(self) -> str:
        """The header's words: both loads, and the node count of every scaled group."""
        groups = ", ".join(f"{c.cluster} {c.pool} {c.before}->{c.after}" for c in self.changes)
        return (
            f"scaled to target on-prem load {self.target:.2f}: achieved {self.achieved:.2f} "
            f"({self.offered_gpus:,.1f} GPUs offered in the busy window over {self.onprem_gpus} on-prem GPUs, "
            f"was {self.offered_gpus / self.onprem_gpus_before:.2f} over {self.onprem_gpus_before}); "
            f"nodes {groups}"
        )


def parse_targets(raw: str) -> list[float]:
    """``--target-load``'s comma-separated loads, each a positive number."""
    values = []
    for part in raw.split(","):
        try:
            value = float(part)
        except ValueError:
            raise ValueError(f"--target-load: {part.strip()!r} is not a number") from None
        if not value > 0 or math.isinf(value):
            raise ValueError(
                f"--target-load: must be positive (a share of the on-prem GPUs, e.g. 0.9), not {part.strip()}"
            )
        values.append(value)
    return values


def _scalable(fleet: FleetDescription) -> list[Key]:
    return [
        (ci, gi)
        for ci, cluster in enumerate(fleet.clusters)
        if cluster.location == "onprem"
        for gi, group in enumerate(cluster.node_groups)
        if group.partitioning == "whole"
    ]


def onprem_gpus(fleet: FleetDescription) -> int:
    """Whole GPUs of the fleet's on-prem clusters."""
    return sum(_group(fleet, key).count * _group(fleet, key).gpus_per_node for key in _scalable(fleet))


def onprem_load(jobs: Sequence[ReplayJob], fleet: FleetDescription) -> float:
    """The busy window's offered GPUs over the on-prem whole GPUs (0 with none)."""
    gpus = onprem_gpus(fleet)
    return offered_load(jobs) / gpus if gpus else 0.0


def _group(fleet: FleetDescription, key: Key) -> NodeGroup:
    return fleet.clusters[key[0]].node_groups[key[1]]


def nodes_for(job: ReplayJob, gpus_per_node: int, one_per_node: bool = False) -> int | None:
    """Nodes of that size a gang needs (workers may share a node, except on Slurm: a node
    each), None if a worker cannot fit."""
    per_node = gpus_per_node // job.gpus_per_worker
    if one_per_node:
        per_node = min(per_node, 1)
    return math.ceil(job.workers / per_node) if per_node else None


def least_nodes(cluster: ClusterDescription, group: NodeGroup, jobs: Sequence[ReplayJob]) -> int:
    """The nodes of the largest gang of ``jobs`` that matches the group's pool and packs on it
    as described; at least 1."""
    nodes = [node for g in cluster.node_groups for node in g.build()]
    pool = group.build()[0].pool
    shapes = {(j.gpu_class, j.min_memory_gb, j.gpus_per_worker, j.workers): j for j in jobs}
    least = 1
    for job in shapes.values():
        need = nodes_for(job, group.gpus_per_node, cluster.flavor == "slurm")
        if need is not None and need <= group.count and pool in matching_pools(nodes, request_from_spec(spec_for(job))):
            least = max(least, need)
    return least


def _closest(counts: dict[Key, int], fleet: FleetDescription, offered: float, target: float) -> dict[Key, int]:
    """From the floors, add nodes one at a time (Webster) until the load is at or below the
    target; the last two steps are the candidates, and the one nearer the target wins."""
    gpus = sum(n * _group(fleet, k).gpus_per_node for k, n in counts.items())
    before = dict(counts)
    while offered / gpus > target:
        key = max(counts, key=lambda k: _group(fleet, k).count / (counts[k] + 0.5))
        before = dict(counts)
        counts[key] += 1
        gpus += _group(fleet, key).gpus_per_node
    gpus_before = sum(n * _group(fleet, k).gpus_per_node for k, n in before.items())
    if abs(offered / gpus_before - target) < abs(offered / gpus - target):
        return before
    return counts


def _scaled_group(group: NodeGroup, count: int) -> NodeGroup:
    """The group with ``count`` nodes; a Kueue quota that covered every GPU still does, one
    below that keeps its share."""
    quota = group.quota
    if quota is not None:
        whole = group.count * group.gpus_per_node
        quota = count * group.gpus_per_node if quota >= whole else max(1, round(quota * count / group.count))
    return replace(group, count=count, quota=quota)


def _apply(fleet: FleetDescription, counts: dict[Key, int]) -> FleetDescription:
    clusters = []
    for ci, cluster in enumerate(fleet.clusters):
        groups = tuple(
            _scaled_group(g, counts[(ci, gi)]) if (ci, gi) in counts else g for gi, g in enumerate(cluster.node_groups)
        )
        clusters.append(replace(cluster, node_groups=groups))
    return replace(fleet, clusters=tuple(clusters))


def scale_to_load(jobs: Sequence[ReplayJob], fleet: FleetDescription, target: float) -> LoadScaling:
    """The fleet with its on-prem nodes scaled so that ``jobs`` put a load as close to
    ``target`` on them as whole nodes allow (never below the largest gang's nodes)."""
    if not target > 0:
        raise ValueError(f"--target-load: must be positive, not {target}")
    keys = _scalable(fleet)
    if not keys:
        raise ValueError("--target-load: the fleet has no on-prem whole-GPU nodes to scale")
    offered = offered_load(jobs)
    if offered <= 0:
        raise ValueError("--target-load: the jobs offer no GPU time in their busy window (too few arrivals)")
    if offered / target > MAX_ONPREM_GPUS:
        raise ValueError(
            f"--target-load: {target:g} asks for {offered / target:,.0f} on-prem GPUs (at most {MAX_ONPREM_GPUS:,})"
        )
    floors = {k: least_nodes(fleet.clusters[k[0]], _group(fleet, k), jobs) for k in keys}
    counts = _closest(dict(floors), fleet, offered, target)
    scaled = _apply(fleet, counts)
    changes = tuple(
        GroupChange(
            fleet.clusters[k[0]].name,
            _group(fleet, k).build()[0].pool,
            _group(fleet, k).gpus_per_node,
            _group(fleet, k).count,
            counts[k],
        )
        for k in keys
    )
    return LoadScaling(
        target, offered / onprem_gpus(scaled), offered, onprem_gpus(fleet), onprem_gpus(scaled), changes, scaled
    )
