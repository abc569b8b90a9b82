"""What a cluster reports of its GPUs: nodes, pools, its local queue and its local limits.

Plain data shared by the backends, which fill it, and placement, which reads it; it lives
outside both so that placement never imports a backend.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from broker.local_limits import NO_LIMITS, LocalLimits


@dataclass(frozen=True)
class NodeInventory:
    name: str
    gpu_model: str
    gpu_memory_gb: int
    gpus_total: int
    gpus_allocatable: int
    gpus_allocated: int
    partitioning: str = "whole"  # "whole" or a MIG profile such as "1g.10gb"
    healthy: bool = True
    draining: bool = False
    interconnect_domain: str = ""
    owner: str = ""  # the scheduler that allocates this node's GPUs

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

    @property
    def gpus_total(self) -> int:
        return sum(n.gpus_total for n in self.nodes)

    @property
    def gpus_allocatable(self) -> int:
        return sum(n.gpus_allocatable for n in self.nodes)

    @property
    def gpus_allocated(self) -> int:
        return sum(n.gpus_allocated for n in self.nodes)

    @property
    def gpus_free(self) -> int:
        return sum(n.gpus_free for n in self.nodes)


@dataclass(frozen=True)
class QueueStats:
    """What the local queue looks like: used to estimate queue wait."""

    pending_jobs: int = 0
    pending_gpus: int = 0
    gpu_hours_per_hour: float = 0.0  # recent throughput of the cluster's GPUs


@dataclass(frozen=True)
class InventorySnapshot:
    cluster: str
    taken_at: datetime
    pools: tuple[PoolInventory, ...]
    queue: QueueStats = field(default_factory=QueueStats)
    # what local admission allows (QoS, partition, ClusterQueue, queue capability)
    limits: LocalLimits = NO_LIMITS
