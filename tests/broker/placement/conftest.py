"""Builders for the placement tests: small fleets described in a line or two."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Sequence

import pytest

from broker.backends.base import InventorySnapshot, NodeInventory, PoolInventory, QueueStats
from broker.placement import ClusterFacts, GpuClass, Policy, PreparedFleet
from broker.placement.engine import place_prepared
from broker.spec import WorkloadSpec

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)
H100 = "NVIDIA H100 80GB HBM3"
A100_80 = "NVIDIA A100-SXM4-80GB"
A100_40 = "NVIDIA A100-SXM4-40GB"
L4 = "NVIDIA L4"

CLASSES = {
    "h100": GpuClass("h100", (H100, "H100"), 80),
    "a100-80gb": GpuClass("a100-80gb", (A100_80, "A100"), 80),
    "a100-40gb": GpuClass("a100-40gb", (A100_40, A100_80, "A100"), 40),
    "l4": GpuClass("l4", (L4,), 24),
}


class Kit:
    """Factories; every one takes keywords so a test states only what matters to it."""

    now = NOW
    H100, A100_80, A100_40, L4 = H100, A100_80, A100_40, L4

    @staticmethod
    def policy(**kw: Any) -> Policy:
        kw.setdefault("gpu_classes", CLASSES)
        return Policy(**kw)

    @staticmethod
    def pool(cluster: str, free: Sequence[int], *, name: str = "gpu", model: str = H100,
             memory: int = 80, part: str = "whole", total: int = 8, owner: str = "slurm",
             domains: Sequence[str] | None = None,
             node_names: Sequence[str] | None = None,
             levels: Sequence[tuple[tuple[str, str], ...]] | None = None) -> PoolInventory:
        nodes = tuple(
            NodeInventory(
                name=node_names[i] if node_names else f"{cluster}-{name}-n{i}",
                gpu_model=model, gpu_memory_gb=memory, gpus_total=total,
                gpus_allocatable=total, gpus_allocated=total - f, partitioning=part,
                interconnect_domain=domains[i] if domains else "", owner=owner,
                topology=levels[i] if levels else ())
            for i, f in enumerate(free))
        return PoolInventory(name, model, memory, part, owner, nodes)

    @staticmethod
    def snap(cluster: str, *pools: PoolInventory, age_s: float = 10,
             queue: QueueStats | None = None) -> InventorySnapshot:
        return InventorySnapshot(cluster, NOW - timedelta(seconds=age_s), tuple(pools),
                                 queue or QueueStats())

    @staticmethod
    def facts(cluster: str, **kw: Any) -> ClusterFacts:
        kw.setdefault("region", "eu-west-1")
        kw.setdefault("image_pull_s", 30.0)
        return ClusterFacts(name=cluster, **kw)

    @staticmethod
    def spec(**kw: Any) -> WorkloadSpec:
        kw.setdefault("gpu_class", "h100")
        return WorkloadSpec(project="p", name="job", command="run", **kw)

    @staticmethod
    def fleet(snaps: Sequence[InventorySnapshot], facts: Sequence[ClusterFacts] | None = None,
              policy: Policy | None = None) -> PreparedFleet:
        facts = facts if facts is not None else [Kit.facts(s.cluster) for s in snaps]
        return PreparedFleet(snaps, facts, policy or Kit.policy())

    @staticmethod
    def place(fleet: PreparedFleet, spec: WorkloadSpec, *, tenant: str = "t",
              quota: int = 1000, **kw: Any):
        kw.setdefault("now", NOW)
        return place_prepared(fleet, spec, tenant=tenant, quota_remaining=quota, **kw)


@pytest.fixture
def kit() -> type[Kit]:
    return Kit
