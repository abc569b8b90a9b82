"""The lower bound (broker/replay/lower_bound.py) against the exhaustive optimum of small
random instances (tests/broker/replay/exhaustive.py): every job order, each job started at
the earliest instant it fits on a per-node fleet, with release dates."""
from __future__ import annotations

import random

import pytest

from broker.replay.lower_bound import BoundJob, mean_wait_bound_s, split_bound_s
from tests.broker.replay.exhaustive import Gang, Node, optimum, place

CLASSES = ("a100", "l4")


def random_instance(rng: random.Random, jobs: int) -> tuple[list[Gang], list[Node]]:
    """One or two classes of 1-3 nodes of 2, 4 or 8 GPUs; gangs of up to 3 workers that fit
    their class, arriving within a minute (or all at once), running 5-60 s."""
    classes = CLASSES[: rng.choice((1, 1, 2))]
    nodes = [Node(c, rng.choice((2, 4, 8))) for c in classes for _ in range(rng.randint(1, 3))]
    spread = rng.choice((0, 20, 60))
    gangs = []
    for _ in range(jobs):
        gpu_class = rng.choice(classes)
        sizes = [n.gpus for n in nodes if n.gpu_class == gpu_class]
        per_worker = rng.choice([g for g in (1, 2, 4, 8) if g <= max(sizes)])
        workers = rng.randint(1, min(3, sum(s // per_worker for s in sizes)))
        arrival = float(rng.randint(0, spread))
        gangs.append(Gang(arrival, per_worker, workers, float(rng.randint(5, 60)), gpu_class))
    return gangs, nodes


def bound_per_class(gangs: list[Gang], nodes: list[Node]) -> float:
    gpus = {c: sum(n.gpus for n in nodes if n.gpu_class == c) for c in CLASSES}
    return mean_wait_bound_s([BoundJob(g.arrival_s, g.gpus, g.run_s, g.gpu_class) for g in gangs], gpus)


def bound_pooled(gangs: list[Gang], nodes: list[Node]) -> float:
    """As the replay states it: every GPU of the fleet in one pool, whatever its class."""
    pooled = [BoundJob(g.arrival_s, g.gpus, g.run_s, "fleet") for g in gangs]
    return mean_wait_bound_s(pooled, {"fleet": sum(n.gpus for n in nodes)})


def bound_split(gangs: list[Gang], nodes: list[Node]) -> float:
    """As the replay states it: the classes split into groups the best way, each group on
    the GPUs any of its classes could use."""
    jobs = [BoundJob(g.arrival_s, g.gpus, g.run_s, g.gpu_class) for g in gangs]
    return split_bound_s(jobs, lambda classes: sum(n.gpus for n in nodes if n.gpu_class in classes))


def test_the_exhaustive_optimum_tries_every_order_not_just_arrival_order():
    # one 4-GPU node: a long job arrives first, a short one just after; serving the short one
    # first (the long one starts at 1, after it) waits less than arrival order
    nodes = [Node("a100", 4)]
    gangs = [Gang(0, 4, 1, 100, "a100"), Gang(0, 4, 1, 1, "a100")]
    assert optimum(gangs, nodes) == 0.5  # waits 1 and 0


def test_a_gang_packs_its_workers_on_nodes_with_room_and_uses_holes_before_later_jobs():
    nodes = [Node("a100", 4), Node("a100", 4)]
    first_start, first = place(Gang(0, 2, 3, 10, "a100"), nodes, [])  # 3 x 2: two on one node
    assert first_start == 0 and sorted(share[3] for share in first) == [2, 4]
    start, _ = place(Gang(0, 4, 1, 5, "a100"), nodes, first)  # no node has 4 free until 10
    assert start == 10
    hole_start, _ = place(Gang(0, 2, 1, 5, "a100"), nodes, first)  # the 2 left free now
    assert hole_start == 0


@pytest.mark.parametrize("jobs,instances", [(2, 50), (3, 50), (4, 40), (5, 30), (6, 20), (7, 10)])
def test_the_bound_is_at_or_below_the_exhaustive_optimum_on_random_small_instances(jobs, instances):
    rng = random.Random(1000 + jobs)
    for _ in range(instances):
        gangs, nodes = random_instance(rng, jobs)
        best = optimum(gangs, nodes)
        assert bound_per_class(gangs, nodes) <= best + 1e-9, (gangs, nodes)
        assert bound_pooled(gangs, nodes) <= best + 1e-9, (gangs, nodes)
        assert bound_split(gangs, nodes) <= best + 1e-9, (gangs, nodes)
        assert bound_split(gangs, nodes) >= max(bound_per_class(gangs, nodes), bound_pooled(gangs, nodes)) - 1e-9
