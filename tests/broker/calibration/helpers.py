"""The shipped job list and a partition's inventory, as the Slurm backend reports them."""
from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from broker.calibration.jobs import JobList, load
from broker.cluster_report import InventorySnapshot, NodeInventory, PoolInventory
from broker.local_limits import JobCap, LocalLimits

SLICE = Path(__file__).parent / "data" / "contended-16gpu.json"


def shipped() -> JobList:
    return load(SLICE)


def inventory(*, allocated: int = 0, cap: int | None = None) -> InventorySnapshot:
    nodes = tuple(NodeInventory(name=f"n{i}", gpu_model="a100", gpu_memory_gb=80, gpus_total=8, gpus_allocatable=8,
                                gpus_allocated=allocated if i == 2 else 0) for i in (1, 2))
    pools = tuple(PoolInventory(name=f"{part}/a100", gpu_model="a100", gpu_memory_gb=80, partitioning="whole",
                                owner="slurm", nodes=nodes) for part in ("gpu", "calib"))
    caps = (JobCap("QoS of calib", pool="calib/a100", max_gpus=cap),) if cap else ()
    return InventorySnapshot(cluster="ci", taken_at=datetime(2026, 12, 4, tzinfo=UTC), pools=pools,
                             limits=LocalLimits(caps=caps))


class FakeKubeApi:
    """What the Kubernetes player calls on a backend, as a script drives it: the jobs it
    created (by name), the refs it cancelled.  Each control plane's fake says how a job is
    made and described."""

    cluster, settings = "k", None

    def __init__(self) -> None:
        self.jobs: dict[str, dict] = {}
        self.cancelled: list[str] = []

    def cancel(self, job_id):
        self.cancelled.append(job_id)
        self.jobs.pop(job_id.split("/")[1], None)
        return True

    def server_version(self):
        return "Kubernetes v1.36.5"
