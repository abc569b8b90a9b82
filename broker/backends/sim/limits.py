"""The local limits a simulated cluster's admission applies, as its inventory reports them.

The same rules ``sim.admission`` enforces: a Slurm partition's QoS cap per job
(``QOSMaxGRESPerJob``) and ``MaxTime`` (``PartitionTimeLimit``), its accounts' fair-share
points, a Kueue flavor's nominal quota and what running jobs use of it.
"""

from __future__ import annotations

from collections import defaultdict

from broker.backends.base import JobState
from broker.local_limits import FairShare, GroupQuota, JobCap, LocalLimits
from broker.backends.sim.cluster import SimulatedCluster


def local_limits(sim: SimulatedCluster) -> LocalLimits:
    if sim.flavor == "slurm":
        return LocalLimits(caps=_partition_caps(sim), shares=_shares(sim))
    if sim.flavor == "kueue":
        return LocalLimits(quotas=_flavor_quotas(sim))
    return LocalLimits()


def _partition_caps(sim: SimulatedCluster) -> tuple[JobCap, ...]:
    caps = []
    for part in sim.partitions.values():
        pools = sorted({n.pool for n in sim.nodes if n.partition == part.name})
        if part.max_time_s is not None:
            caps += [JobCap(f"partition {part.name}", pool=pool, max_time_s=part.max_time_s) for pool in pools]
        if part.max_gpus_per_job is None:
            continue
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


def _shares(sim: SimulatedCluster) -> tuple[FairShare, ...]:
    # the simulator keeps points only; the factor is given relative to the highest
    top = max(sim.share_points.values(), default=0.0) or 1.0
    return tuple(FairShare(f"fair share of account {a}", a, p / top, p) for a, p in sorted(sim.share_points.items()))
