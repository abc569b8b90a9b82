"""The destination's own admission rules, checked before a job is sent there.

A job larger than a per-job cap or a group quota's whole limit can never be admitted:
the cluster is excluded with the rule and the numbers.  A job within the limit but above
what is left of a quota now would wait locally until running jobs give GPUs back: a
policy hold at the destination is not capacity, so the pool is not a place to start it
now (``short_now``, with the estimated wait for quota) and the job waits at the broker,
free to go wherever GPUs come free first.
"""

from __future__ import annotations

from typing import Iterable

from broker.cluster_report import PoolInventory, QueueStats
from broker.local_limits import GroupQuota, LocalLimits
from broker.placement.policy import QueueModel
from broker.placement.results import Exclusion
from broker.spec import WorkloadSpec


def never_admitted(
    limits: LocalLimits, pool: PoolInventory, spec: WorkloadSpec, scopes: Iterable[str] = ()
) -> Exclusion | None:
    """The first local rule the whole job breaks, whatever else is running."""
    scopes = tuple(scopes)
    need = spec.total_gpus
    for cap in limits.caps_for(pool.name, scopes):
        if cap.max_gpus is not None and need > cap.max_gpus:
            return Exclusion("local_limit", f"{cap.source} caps a job at {cap.max_gpus} GPUs; this job needs {need}")
        nodes = nodes_needed(pool, spec)
        if cap.max_nodes is not None and nodes > cap.max_nodes:
            return Exclusion("local_limit", f"{cap.source} caps a job at {cap.max_nodes} nodes; this job needs {nodes}")
        asked = spec.time_limit_minutes * 60.0
        if cap.max_time_s is not None and asked > cap.max_time_s:
            return Exclusion(
                "local_limit",
                f"{cap.source} caps a job at "
                f"{cap.max_time_s / 60:g} minutes; this job asks for "
                f"{spec.time_limit_minutes} minutes",
            )
    for quota in limits.quotas_for(pool.name, scopes):
        if quota.limit_gpus is not None and need > quota.limit_gpus:
            return Exclusion(
                "local_limit",
                f"{quota.source} admits at most {quota.limit_gpus} GPUs{_split(quota)}; this job needs {need}",
            )
        if quota.max_jobs == 0:
            return Exclusion("local_limit", f"{quota.source} admits no jobs (MaxJobs=0)")
    return None


def short_now(
    limits: LocalLimits,
    pool: str,
    spec: WorkloadSpec,
    queue: QueueStats,
    model: QueueModel,
    scopes: Iterable[str] = (),
) -> Exclusion | None:
    """The first group quota that cannot admit the whole job now, with the numbers.

    Such a pool is not a place to start the job: sent there, it would wait in the local
    queue for quota (and every job sent after it, behind it) while the broker could still
    start it wherever GPUs come free first.  The estimated wait for quota says how long."""
    scopes = tuple(scopes)
    for quota in limits.quotas_for(pool, scopes):
        headroom = quota.headroom_gpus
        full = quota.max_jobs is not None and quota.running_jobs >= quota.max_jobs
        if (headroom is None or spec.total_gpus <= headroom) and not full:
            continue
        wait = quota_wait_s(limits, pool, spec, queue, model, scopes)
        use = (
            f"{quota.max_jobs} jobs at once, {quota.running_jobs} running or sent"
            if full
            else f"{quota.limit_gpus} GPUs, {quota.used_gpus} in use or sent; this job needs {spec.total_gpus}"
        )
        return Exclusion(
            "local_quota", f"{quota.source} admits {use}: it would wait there about {wait / 60:.0f} min for quota"
        )
    return None


def _split(quota: GroupQuota) -> str:
    if not quota.borrow_gpus:
        return ""
    return f" (nominal {quota.nominal_gpus} + borrowing {quota.borrow_gpus})"


def nodes_needed(pool: PoolInventory, spec: WorkloadSpec) -> int:
    """The nodes the gang occupies where a cap counts nodes: on Slurm (the only control plane
    with one, ``MaxNodes``) each worker takes a node of its own (``--nodes=workers``)."""
    return spec.workers


def quota_wait_s(
    limits: LocalLimits, pool: str, spec: WorkloadSpec, queue: QueueStats, model: QueueModel, scopes: Iterable[str] = ()
) -> float:
    """How long the job would wait for local quota to come free (0 when it fits now).

    The shortfall in GPUs, turned over at the cluster's throughput (GPU-hours per hour);
    when that is unknown, at the quota's own size per assumed job length."""
    wait = 0.0
    for quota in limits.quotas_for(pool, scopes):
        headroom = quota.headroom_gpus
        if headroom is not None and spec.total_gpus > headroom and quota.limit_gpus:
            short = spec.total_gpus - headroom
            rate = queue.gpu_hours_per_hour or quota.limit_gpus / max(model.assumed_job_hours, 1e-6)
            wait = max(wait, short * model.assumed_job_hours / rate * 3600.0)
        if quota.max_jobs is not None and quota.max_jobs > 0 and quota.running_jobs >= quota.max_jobs:
            wait = max(wait, model.assumed_job_hours * 3600.0 / quota.max_jobs)
    return min(wait, model.max_wait_s)
