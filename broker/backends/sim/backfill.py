"""Backfilling local queues: what real schedulers do by default.

* Slurm (``SchedulerType=sched/backfill``): the first job of a pool set that cannot start
  gets a reservation: the earliest instant its gang packs once running jobs end at their
  *time limits* (Slurm knows limits, not run times), and on which nodes.  A later job
  may start now if it would end before that instant by its own limit, or if it leaves
  the reserved GPUs alone.  One reservation per pool set (EASY backfill).
* Kueue (``BestEffortFIFO``, the ClusterQueue default) and Volcano (its ``backfill``
  action): a workload that cannot be admitted does not hold back the ones behind it.

The strict-FIFO behaviour stays available (``queueing="strict"``) because tests and the
demo rely on its reasons.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from broker.backends.sim.model import JobRequest, SimJob, SimNode
from broker.backends.sim.placement import Placement, pack

QUEUEING = ("strict", "backfill")


@dataclass
class Reservation:
    """The GPUs a blocked job will take at ``shadow_s`` (cluster clock seconds)."""

    shadow_s: float
    free_at_shadow: dict[str, int]  # node -> GPUs free at the shadow instant
    request: JobRequest
    nodes: list[SimNode]


LimitFn = Callable[[SimJob], float]  # a job's time limit on the cluster's clock


def reserve(
    job: SimJob, nodes: Sequence[SimNode], running: Sequence[SimJob], now: float, limit: LimitFn
) -> Reservation | None:
    """When and where ``job`` could start if running jobs end at their limits."""
    free = {n.name: n.free for n in nodes}
    names = set(free)

    def limit_end(other: SimJob) -> float:
        started = other.started_at if other.started_at is not None else now
        return max(now, started + limit(other))

    ending = sorted((j for j in running if any(n in names for n, _ in j.placement)), key=limit_end)
    for other in ending:
        for node, gpus in other.placement:
            if node in free:
                free[node] += gpus
        if _packs(nodes, job.request, lambda n: free.get(n.name, 0)):
            return Reservation(limit_end(other), dict(free), job.request, list(nodes))
    return None


def _packs(nodes: Sequence[SimNode], req: JobRequest, free: Callable[[SimNode], int]) -> bool:
    """The gang fits within one pool (a job never mixes GPU models)."""
    pools: dict[str, list[SimNode]] = {}
    for node in nodes:
        pools.setdefault(node.pool, []).append(node)
    return any(pack(members, req, free) is not None for members in pools.values())


def may_backfill(reservation: Reservation, job: SimJob, placement: Placement, now: float, limit: LimitFn) -> bool:
    """Starting ``job`` now on ``placement`` does not delay the reserved job."""
    if now + limit(job) <= reservation.shadow_s:
        return True
    free = dict(reservation.free_at_shadow)
    for node, gpus in placement:
        if node in free:
            free[node] -= gpus
    return _packs(reservation.nodes, reservation.request, lambda n: max(0, free.get(n.name, 0)))


def shape_of(job: SimJob) -> tuple:
    """What admission looks at, apart from the job's identity and time limit."""
    r = job.request
    return (
        job.partition,
        r.gpus_per_worker,
        r.workers,
        r.partitioning,
        r.gpu_models,
        r.gpu_class,
        r.min_gpu_memory_gb,
        r.same_interconnect,
    )


def pool_key(pools: Sequence[str]) -> tuple[str, ...]:
    return tuple(sorted(pools))


def reservations_hit(reservations: Mapping[tuple[str, ...], Reservation], pools: Sequence[str]) -> list[Reservation]:
    """Reservations on any of these pools."""
    wanted = set(pools)
    return [r for key, r in reservations.items() if wanted.intersection(key)]
