"""A true lower bound on the mean wait of a job list on a fleet: no policy can beat it.

The relaxation (proof in docs/replay.md, "The lower bound"): the GPUs of one class, summed
over every cluster, become one machine that processes work (GPU-seconds) at a rate equal to
their number, preemptively and in any split.  Any real schedule maps onto it: job j runs
``gpus * run_s`` of work at the constant rate ``gpus`` between its start and its end, and the
GPUs of a class never do more than their number of GPU-seconds per second.  Two facts about
that one machine each give a bound on the sum of waits, and the larger one is taken:

* SRPT: shortest-remaining-work-first minimises the sum of ends (one machine, preemption,
  release dates), and a real end is start + run_s, so
  sum (start - arrival) >= sum (SRPT end - arrival - run_s);
* mean busy time: a real job's work is done at a constant rate over [start, end], so its
  work-weighted mean instant is start + run_s / 2; shortest-original-work-first minimises
  the sum of mean busy times on the machine, so
  sum (start - arrival) >= sum (that rule's mean busy time - arrival - run_s / 2).

Either bound holds for any subset of the jobs (the others wait at least 0), so each is also
taken over the jobs whose own term is positive, repeatedly.  Jobs of more than half a class's
GPUs can never run two at once: they hold one machine in turn, each for its run time, and
SRPT there bounds their waits; the other jobs' one-machine bound adds to it (disjoint sets).
The mean wait of every policy is at least the best sum over the number of jobs (and at least
0).  It bounds the mean, not the p95: a percentile of waits has no such argument.

A job runs only on the GPUs its class could use: the jobs of any group of classes run on no
more units than that group could use, so each way of splitting the classes into groups gives
a bound (the sum of each group's, alone on its units), and the best split is taken.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from broker.backends.sim.model import NodeGroup, pool_name
from broker.fleet_file import FleetDescription
from broker.placement.policy import GpuClass
from broker.replay.jobs import ReplayJob

# each pass drops the jobs whose term is not positive; a few passes reach a fixed point on
# every instance tried, and any pass that stops early still gives a valid bound
SUBSET_PASSES = 8


@dataclass(frozen=True)
class BoundJob:
    arrival_s: float
    gpus: int
    run_s: float
    gpu_class: str

    @property
    def work(self) -> float:
        return self.gpus * self.run_s


def _check_rate(rate: float) -> None:
    if rate <= 0:
        raise ValueError(f"rate: a class with jobs needs GPUs, got {rate}")


def _priority_serve(
    jobs: Sequence[BoundJob],
    rate: float,
    key: Callable[[int, float], float],
    served: Callable[[int, float, float], None],
) -> None:
    """One machine of ``rate`` work per second, always serving the waiting job of the lowest
    ``key(index, remaining work)``; ``served(index, from, to)`` for every stretch served."""
    _check_rate(rate)
    order = sorted(range(len(jobs)), key=lambda i: jobs[i].arrival_s)
    waiting: list[tuple[float, int, float]] = []  # (key, job index, remaining work)
    now, k = 0.0, 0
    while k < len(order) or waiting:
        if not waiting:
            now = max(now, jobs[order[k]].arrival_s)
        while k < len(order) and jobs[order[k]].arrival_s <= now:
            i = order[k]
            heapq.heappush(waiting, (key(i, jobs[i].work), i, jobs[i].work))
            k += 1
        _, i, work = heapq.heappop(waiting)
        next_arrival = jobs[order[k]].arrival_s if k < len(order) else float("inf")
        finish = now + work / rate
        if finish <= next_arrival:
            served(i, now, finish)
            now = finish
        else:  # an arrival comes first: serve until then, then choose again
            served(i, now, next_arrival)
            left = work - (next_arrival - now) * rate
            heapq.heappush(waiting, (key(i, left), i, left))
            now = next_arrival


def srpt_ends(jobs: Sequence[BoundJob], rate: float) -> list[float]:
    """Each job's end on one machine of ``rate`` work per second, SRPT with release times."""
    ends = [job.arrival_s for job in jobs]  # a job of no work ends where it arrives

    def served(i: int, _start: float, end: float) -> None:
        ends[i] = end

    _priority_serve(jobs, rate, lambda _i, left: left, served)
    return ends


def mean_busy_times(jobs: Sequence[BoundJob], rate: float) -> list[float]:
    """Each job's work-weighted mean instant of service on one machine of ``rate`` work per
    second that serves the job of the smallest original work first (preemptive, release
    times): the schedule with the least sum of these means."""
    moments = [0.0] * len(jobs)  # integral of t over each job's work

    def served(i: int, start: float, end: float) -> None:
        moments[i] += rate * (end * end - start * start) / 2

    _priority_serve(jobs, rate, lambda i, _left: jobs[i].work, served)
    return [m / job.work if job.work > 0 else job.arrival_s for m, job in zip(moments, jobs, strict=True)]


def srpt_terms(jobs: Sequence[BoundJob], rate: float) -> list[float]:
    """Per job, SRPT end - arrival - run time: their sum bounds the sum of waits."""
    ends = srpt_ends(jobs, rate)
    return [end - j.arrival_s - j.run_s for end, j in zip(ends, jobs, strict=True)]


def busy_time_terms(jobs: Sequence[BoundJob], rate: float) -> list[float]:
    """Per job, least-sum mean busy time - arrival - run time / 2: their sum bounds the sum
    of waits."""
    means = mean_busy_times(jobs, rate)
    return [m - j.arrival_s - j.run_s / 2 for m, j in zip(means, jobs, strict=True)]


def best_subset_sum(jobs: Sequence[BoundJob], rate: float, terms: Callable[..., list[float]]) -> float:
    """The largest sum of ``terms`` found over the jobs, then over those whose term was
    positive, and so on: each is a bound on the sum of waits of all the jobs (0 for none)."""
    best, subset = 0.0, list(jobs)
    for _ in range(SUBSET_PASSES):
        if not subset:
            break
        values = terms(subset, rate)
        best = max(best, sum(values))
        kept = [j for j, v in zip(subset, values, strict=True) if v > 0]
        if len(kept) == len(subset):
            break
        subset = kept
    return best


def fluid_wait_sum_bound_s(jobs: Sequence[BoundJob], rate: float) -> float:
    """A lower bound on the sum of the waits of jobs that share ``rate`` GPUs, from the one
    machine: the better of SRPT and mean busy time, each over its best subset found."""
    return max(best_subset_sum(jobs, rate, srpt_terms), best_subset_sum(jobs, rate, busy_time_terms))


def one_at_a_time_wait_sum_bound_s(jobs: Sequence[BoundJob]) -> float:
    """A lower bound on the sum of the waits of jobs of which no two can run at once: they
    hold one machine in turn, each for its run time, and SRPT on that machine (with
    preemption, which only helps) has the least sum of ends."""
    turns = [BoundJob(j.arrival_s, 1, j.run_s, j.gpu_class) for j in jobs]
    return best_subset_sum(turns, 1.0, srpt_terms)


def class_wait_sum_bound_s(jobs: Sequence[BoundJob], rate: float) -> float:
    """A lower bound on the sum of the waits of jobs that share ``rate`` GPUs.

    Jobs of more than half the GPUs can never run two at once, so they are also bounded on
    their own (one at a time) and the rest on the one machine: the waits of disjoint sets
    add up, each set bounded as if it were alone."""
    _check_rate(rate)
    big = [j for j in jobs if 2 * j.gpus > rate]
    rest = [j for j in jobs if 2 * j.gpus <= rate]
    split = one_at_a_time_wait_sum_bound_s(big) + fluid_wait_sum_bound_s(rest, rate) if big else 0.0
    return max(fluid_wait_sum_bound_s(jobs, rate), split)


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
        total += class_wait_sum_bound_s(group, float(gpus_by_class[gpu_class]))
    return max(0.0, total / count)


def group_units(group: NodeGroup) -> int:
    """A node group's units at its largest: an elastic pool at its node maximum, every MIG
    slice and shared replica a unit."""
    nodes = max(group.count, group.max_count or 0)
    return nodes * group.gpus_per_node * group.units_of_a_gpu


def fleet_units(fleet: FleetDescription) -> int:
    """Every GPU, MIG slice and shared replica of the fleet, elastic pools at their maximum:
    the one machine's rate.  Counting the units of any kind for every job only adds
    capacity, so the bound stays a bound."""
    return sum(group_units(g) for cluster in fleet.clusters for g in cluster.node_groups)


def could_serve(group: NodeGroup, gpu_class: GpuClass | None, class_name: str, min_memory_gb: int) -> bool:
    """Whether a job of that class and memory could ever run on the group, by either way a
    class is matched: the broker's (the policy class lists the model: ``GpuClass.includes``)
    or the simulator's (a pool of the class's name, or a model the name mentions:
    ``broker.backends.sim.placement.matching_pools``).  The memory is the whole GPU's, also on
    a MIG node: counting more units than a job could use keeps the bound a bound."""
    if group.gpu_memory_gb < min_memory_gb:
        return False
    model, name = group.gpu_model.lower(), class_name.strip().lower()
    pool = pool_name(group.gpu_model, group.gpu_memory_gb, group.partitioning)
    by_policy = gpu_class is not None and gpu_class.includes(group.gpu_model, group.gpu_memory_gb)
    return by_policy or name in (pool, model) or model in name


def split_bound_s(jobs: Sequence[BoundJob], units_of: Callable[[frozenset[str]], int]) -> float:
    """The lower bound on the mean wait of ``jobs`` whose ``gpu_class`` says which units
    they could use: ``units_of(classes)`` counts the units any job of those classes could
    run on.  Every way of splitting the classes into groups gives one: each group's jobs
    alone on its units (in a real schedule they run on no others, and the waits of disjoint
    sets add up); the best is taken.  More than ``SPLIT_CLASSES`` classes: all together, or
    each alone."""
    by_class: dict[str, list[BoundJob]] = defaultdict(list)
    for job in jobs:
        by_class[job.gpu_class].append(job)
    if not by_class:
        return 0.0
    names = sorted(by_class)
    splits = _partitions(names) if len(names) <= SPLIT_CLASSES else [[names], [[n] for n in names]]
    memo: dict[frozenset[str], float] = {}

    def group_sum(group: frozenset[str]) -> float:
        if group not in memo:
            units = units_of(group)
            if units <= 0:
                raise ValueError(f"gpu class {', '.join(sorted(group))}: the fleet has no GPUs it could use")
            memo[group] = class_wait_sum_bound_s([j for n in sorted(group) for j in by_class[n]], float(units))
        return memo[group]

    best = max(sum(group_sum(frozenset(g)) for g in split) for split in splits)
    return max(0.0, best / len(jobs))


# a set of n classes splits in Bell(n) ways: 203 for 6
SPLIT_CLASSES = 6


def _partitions(names: list[str]) -> list[list[list[str]]]:
    """Every way to split ``names`` into non-empty groups."""
    if not names:
        return [[]]
    first, rest = names[0], names[1:]
    out = []
    for split in _partitions(rest):
        out.append([[first], *split])
        for i in range(len(split)):
            out.append([*split[:i], [first, *split[i]], *split[i + 1 :]])
    return out


def replay_wait_bound_s(
    jobs: Sequence[ReplayJob], fleet: FleetDescription, classes: Mapping[str, GpuClass] | None = None
) -> float:
    """The lower bound on the mean wait of a replay's scored jobs (the broker's: local users'
    jobs are left out, as the policies' mean wait leaves them out) on its fleet: each job only
    on the units its GPU class and memory could use (``could_serve``; ``classes``: the
    policy's, by name), the classes split into groups in the best way (``split_bound_s``).

    Leaving the local jobs out keeps it a bound: a real schedule of every job, read for the
    broker's jobs alone, is a schedule of those jobs on the same machine, so their sum of
    waits is at least the bound of that subset."""
    classes = classes or {}
    groups = [g for cluster in fleet.clusters for g in cluster.node_groups]
    scored = [j for j in jobs if not j.local]
    keyed = [(f"{j.gpu_class}/{j.min_memory_gb}", j) for j in scored]
    serves = {
        key: {i for i, g in enumerate(groups) if could_serve(g, classes.get(j.gpu_class), j.gpu_class, j.min_memory_gb)}
        for key, j in dict(keyed).items()
    }

    def units_of(group: frozenset[str]) -> int:
        return sum(group_units(groups[i]) for i in set().union(*(serves[k] for k in group)))

    return split_bound_s([BoundJob(j.submit_s, j.total_gpus, j.duration_s, key) for key, j in keyed], units_of)
