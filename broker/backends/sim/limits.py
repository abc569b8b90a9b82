"""The local limits a simulated cluster's admission applies, as its inventory reports them.

The same rules ``sim.admission`` enforces: a Slurm partition's QoS cap per job
(``QOSMaxGRESPerJob``), a Kueue flavor's nominal quota and what running jobs use of it.
"""

from __future__ import annotations

from collections import defaultdict

from broker.backends.base import JobState
from broker.local_limits import GroupQuota, JobCap, LocalLimits
from broker.backends.sim.cluster import SimulatedCluster


def local_limits(sim: SimulatedCluster) -> LocalLimits:
    if sim.flavor == "slurm":
        return LocalLimits(caps=_partition_caps(sim))
    if sim.flavor == "kueue":
        return LocalLimits(quotas=_flavor_quotas(sim))
    return LocalLimits()


def _partition_caps(sim: SimulatedCluster) -> tuple[JobCap, ...]:
    caps = []
    for part in sim.partitions.values():
        if part.max_gpus_per_job is None:
            continue
        pools = sorted({n.pool for n in sim.nodes if n.partition == part.name})
        caps += [
            JobCap(
                source=f"QoS of partition {part.name} (MaxTRESPerJob=gres/gpu={part.max_gpus_per_job})",
                pool=pool,
                max_gpus=part.max_gpus_per_job,
            )
            for pool in pools
        ]
    return tuple(caps)


def _flavor_quotas(sim: SimulatedCluster) -> tuple[GroupQuota, ...]:
    used: dict[str, int] = defaultdict(int)
    running: dict[str, int] = defaultdict(int)
    for job in sim.jobs():
        if job.state is JobState.RUNNING and job.placement and not job.lost:
            pool = sim.node(job.placement[0][0]).pool
            used[pool] += job.gpus
            running[pool] += 1
    return tuple(
        GroupQuota(
            source=f"ClusterQueue {sim.name} flavor {flavor}",
            pool=flavor,
            limit_gpus=nominal,
            used_gpus=used[flavor],
            running_jobs=running[flavor],
        )
        for flavor, nominal in sorted(sim.quotas.items())
    )
