"""A true lower bound on the mean wait of a job list on a fleet: no policy can beat it.

The relaxation (proof in docs/replay.md, "The lower bound"): the GPUs of one class, summed
over every cluster, become one machine that processes work (GPU-seconds) at a rate equal to
their number, preemptively and in any split.  Any real schedule maps onto it: job j runs
``gpus * run_s`` of work between its start and its end, and the GPUs of a class never do more
than their number of GPU-seconds per second, so the same ends are reachable on the one
machine.  On it, shortest-remaining-work-first with release times (SRPT) minimises the sum
of ends (the known optimality of SRPT for one machine with preemption and release dates), so

    sum over jobs of (start - arrival)  >=  sum over jobs of (SRPT end - arrival - run_s)

and the mean wait of every policy is at least that sum over the number of jobs (and at least
0).  It bounds the mean, not the p95: a percentile of waits has no such argument.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from broker.backends.sim.model import mig_geometry
from broker.fleet_file import FleetDescription
from broker.replay.jobs import ReplayJob


@dataclass(frozen=True)
class BoundJob:
    arrival_s: float
    gpus: int
    run_s: float
    gpu_class: str


def srpt_ends(jobs: Sequence[BoundJob], rate: float) -> list[float]:
    """Each job's end on one machine of ``rate`` work per second, SRPT with release times."""
    if rate <= 0:
        raise ValueError(f"rate: a class with jobs needs GPUs, got {rate}")
    order = sorted(range(len(jobs)), key=lambda i: jobs[i].arrival_s)
    ends = [0.0] * len(jobs)
    waiting: list[tuple[float, int]] = []  # (remaining work, job index)
    now, k = 0.0, 0
    while k < len(order) or waiting:
        if not waiting:
            now = max(now, jobs[order[k]].arrival_s)
        while k < len(order) and jobs[order[k]].arrival_s <= now:
            job = jobs[order[k]]
            heapq.heappush(waiting, (job.gpus * job.run_s, order[k]))
            k += 1
        work, i = heapq.heappop(waiting)
        next_arrival = jobs[order[k]].arrival_s if k < len(order) else float("inf")
        finish = now + work / rate
        if finish <= next_arrival:
            now, ends[i] = finish, finish
        else:  # an arrival comes first: serve until then, then choose again
            heapq.heappush(waiting, (work - (next_arrival - now) * rate, i))
            now = next_arrival
    return ends


def mean_wait_bound_s(jobs: Iterable[BoundJob], gpus_by_class: Mapping[str, int]) -> float:
    """The lower bound on the mean wait (seconds) of ``jobs`` on a fleet with that many GPUs
    of each class, summed over its clusters (0 for no jobs)."""
    by_class: dict[str, list[BoundJob]] = defaultdict(list)
    for job in jobs:
        by_class[job.gpu_class].append(job)
    count = sum(len(group) for group in by_class.values())
    if not count:
        return 0.0
    total = 0.0
    for gpu_class, group in by_class.items():
        if gpus_by_class.get(gpu_class, 0) <= 0:
            raise ValueError(f"gpu class {gpu_class!r}: the fleet has no GPUs of it")
        ends = srpt_ends(group, float(gpus_by_class[gpu_class]))
        total += sum(end - job.arrival_s - job.run_s for end, job in zip(ends, group, strict=True))
    return max(0.0, total / count)


def fleet_units(fleet: FleetDescription) -> int:
    """Every GPU and every MIG slice of the fleet: the one machine's rate.  Counting the units
    of any kind for every job only adds capacity, so the bound stays a bound."""
    total = 0
    for cluster in fleet.clusters:
        for group in cluster.node_groups:
            slices = 1 if group.partitioning == "whole" else mig_geometry(group.partitioning)[0]
            total += group.count * group.gpus_per_node * slices
    return total


def replay_wait_bound_s(jobs: Sequence[ReplayJob], fleet: FleetDescription) -> float:
    """The lower bound on the mean wait of a replay's jobs on its fleet (all classes on the one
    machine: a job of any class never has more GPUs than the fleet's units)."""
    units = fleet_units(fleet)
    pooled = [BoundJob(j.submit_s, j.total_gpus, j.duration_s, "fleet") for j in jobs]
    return mean_wait_bound_s(pooled, {"fleet": units}) if pooled else 0.0
