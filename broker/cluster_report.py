"""What a cluster reports of its GPUs: nodes, pools, its local queue and its local limits.

Plain data shared by the backends, which fill it, and placement, which reads it; it lives
outside both so that placement never imports a backend.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable, Mapping

from broker.local_limits import NO_LIMITS, LocalLimits


# where a node sits in its control plane's topology, widest level first: (level, domain) pairs
Levels = tuple[tuple[str, str], ...]
# each node's levels, by node name, as a backend reads them
NodeLevels = dict[str, Levels]


@dataclass(frozen=True)
class NodeInventory:
    name: str
    gpu_model: str
    gpu_memory_gb: int
    gpus_total: int
    gpus_allocatable: int
    gpus_allocated: int
    partitioning: str = "whole"  # "whole", a MIG profile such as "1g.10gb", or a kind of share
    healthy: bool = True
    draining: bool = False
    interconnect_domain: str = ""
    owner: str = ""  # the scheduler that allocates this node's GPUs
    # an elastic pool's node that is not up: "available" (the pool may add it on demand),
    # "requested" (provisioning); "" for a node that is up
    provisioning: str = ""
    # why some or all of its GPUs take no work, in the control plane's words ("DRAIN: bad
    # gpu", "not Ready: KubeletNotReady", "2 of 8 GPUs not allocatable"); "" when all do
    health_reason: str = ""
    # where the node sits in its control plane's topology, widest level first: (level,
    # domain) pairs such as (("block", "b1"), ("rack", "r3")); level names are the control
    # plane's own (a Kueue Topology's node labels, Volcano HyperNode tiers, Slurm switches)
    topology: Levels = ()
    # a shared node's units per GPU (time-slicing or MPS replicas, Slurm shards): what one unit
    # of its GPUs is charged as a share of; 1 for whole GPUs and MIG slices
    units_per_gpu: int = 1

    def to_json(self) -> dict[str, str | int | bool | list[list[str]]]:
        """As ``GpuPool.nodes`` stores it: the keys rows have always had (and
        ``provisioning`` where it is set)."""
        out: dict[str, str | int | bool | list[list[str]]] = {
            "name": self.name,
            "gpu_model": self.gpu_model,
            "gpu_memory_gb": self.gpu_memory_gb,
            "total": self.gpus_total,
            "allocatable": self.gpus_allocatable,
            "allocated": self.gpus_allocated,
            "partitioning": self.partitioning,
            "healthy": self.healthy,
            "draining": self.draining,
            "domain": self.interconnect_domain,
            "owner": self.owner,
        }
        if self.provisioning:
            out["provisioning"] = self.provisioning
        if self.units_per_gpu != 1:
            out["units_per_gpu"] = self.units_per_gpu
        if self.health_reason:
            out["reason"] = self.health_reason
        if self.topology:
            out["topology"] = [[level, domain] for level, domain in self.topology]
        return out

    @classmethod
    def from_json(
        cls,
        data: Mapping[str, Any],
        *,
        gpu_model: str,
        gpu_memory_gb: int,
        partitioning: str,
        owner: str,
        promised: Mapping[str, int] | None = None,
    ) -> NodeInventory:
        """A stored node (``to_json``); what an older row lacks comes from its pool (the
        keyword arguments).  ``promised``: GPUs the broker sent to each node since the report,
        counted as allocated; allocated reads as never beyond what the node can allocate."""
        name, allocatable = data["name"], data["allocatable"]
        extra = promised.get(name, 0) if promised else 0
        return cls(
            name=name,
            gpu_model=data.get("gpu_model", gpu_model),
            gpu_memory_gb=data.get("gpu_memory_gb", gpu_memory_gb),
            gpus_total=data["total"],
            gpus_allocatable=allocatable,
            gpus_allocated=min(allocatable, data["allocated"] + extra),
            partitioning=data.get("partitioning", partitioning),
            units_per_gpu=data.get("units_per_gpu", 1),
            healthy=data.get("healthy", True),
            draining=data.get("draining", False),
            health_reason=data.get("reason", ""),
            interconnect_domain=data.get("domain", ""),
            owner=data.get("owner", owner),
            provisioning=data.get("provisioning", ""),
            topology=tuple((str(level), str(domain)) for level, domain in data.get("topology", ())),
        )

    @property
    def gpus_free(self) -> int:
        if not self.healthy or self.draining:
            return 0
        return max(0, self.gpus_allocatable - self.gpus_allocated)


@dataclass(frozen=True)
class PoolInventory:
    """GPUs of one model and partitioning behind one scheduler queue/partition/flavor."""

    name: str
    gpu_model: str
    gpu_memory_gb: int
    partitioning: str
    owner: str
    nodes: tuple[NodeInventory, ...]

    # The pool's GPUs as they are now: the nodes that are up (an elastic pool's nodes not up
    # yet are in ``nodes``, for placement, but hold no GPU today)
    @property
    def up(self) -> tuple[NodeInventory, ...]:
        return tuple(n for n in self.nodes if not n.provisioning)

    @property
    def gpus_total(self) -> int:
        return sum(n.gpus_total for n in self.up)

    @property
    def gpus_allocatable(self) -> int:
        return sum(n.gpus_allocatable for n in self.up)

    @property
    def gpus_allocated(self) -> int:
        return sum(n.gpus_allocated for n in self.up)

    @property
    def gpus_free(self) -> int:
        return sum(n.gpus_free for n in self.up)

    @property
    def units_per_gpu(self) -> int:
        """Units one GPU of the pool is split into (shares); 1 for whole GPUs and MIG slices,
        whose charge is the slice as a unit."""
        return max((n.units_per_gpu for n in self.nodes), default=1)


@dataclass(frozen=True)
class QueueStats:
    """What the local queue looks like: used to estimate queue wait."""

    pending_jobs: int = 0
    pending_gpus: int = 0
    gpu_hours_per_hour: float = 0.0  # recent throughput of the cluster's GPUs
    # the pending GPUs per account (Slurm): where the scheduler orders its queue by account
    # (fair share), which of them start before a job depends on whose job it is
    pending_gpus_by_scope: tuple[tuple[str, int], ...] = ()

    def gpus_ahead(self, points: Mapping[str, float], scopes: Iterable[str]) -> int:
        """The pending GPUs that start before a job running under ``scopes``, where the
        queue is ordered by each account's priority ``points`` (Slurm's fair-share factor
        times its weight), ties by submission: those of accounts with as many points or
        more, and those of accounts it has no points for.  All of them when the order is
        not by account, or the job's account has no points (nothing says it goes first)."""
        if not points or not self.pending_gpus_by_scope:
            return self.pending_gpus
        own = [points[s] for s in scopes if s in points]
        if not own:
            return self.pending_gpus
        mine = max(own)
        behind = sum(g for scope, g in self.pending_gpus_by_scope if scope in points and points[scope] < mine)
        return max(0, self.pending_gpus - behind)


@dataclass(frozen=True)
class InventorySnapshot:
    cluster: str
    taken_at: datetime
    pools: tuple[PoolInventory, ...]
    queue: QueueStats = field(default_factory=QueueStats)
    # what local admission allows (QoS, partition, ClusterQueue, queue capability)
    limits: LocalLimits = NO_LIMITS
