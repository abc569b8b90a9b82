"""The lower bound on the mean wait (broker/replay/lower_bound.py): exact on hand-computed
cases, and at or below every policy's mean wait on the same jobs."""
from __future__ import annotations

import random
from dataclasses import replace

import pytest

from broker.replay.baselines import FirstFit, MultiKueueIncremental, MultiKueueRace, OnpremFirstNoGang
from broker.replay.clairvoyant import ClairvoyantFifo
from broker.fleet_file import parse_fleet
from broker.replay.lower_bound import (
    BoundJob,
    fleet_units,
    mean_busy_times,
    mean_wait_bound_s,
    replay_wait_bound_s,
    split_bound_s,
    srpt_ends,
)
from broker.services.fleet.policy import current_policy
from tests.broker.replay.test_baselines import TWIN_FLEET, job, replay


def test_one_machine_serves_the_shortest_remaining_work_first():
    # rate 2: a (work 8) runs alone until b (work 2) arrives at 1, b finishes at 2, a at 5
    jobs = [BoundJob(0, 2, 4, "a100"), BoundJob(1, 1, 2, "a100")]
    assert srpt_ends(jobs, 2.0) == [5.0, 2.0]


def test_shortest_original_work_first_gives_each_jobs_mean_busy_time():
    # rate 2: a (work 8) runs 0-1, b (work 2, arrives at 1) runs 1-2, a again 2-5
    jobs = [BoundJob(0, 2, 4, "a100"), BoundJob(1, 1, 2, "a100")]
    assert mean_busy_times(jobs, 2.0) == [(1 + 21) / 8, 1.5]


def test_the_srpt_form_bounds_one_gpu_jobs_that_queue_behind_one_long_one():
    # rate 1: srpt ends b at 2, a at 11: waits at least (11 - 10) + (2 - 1 - 1) = 1 in all
    jobs = [BoundJob(0, 1, 10, "a100"), BoundJob(1, 1, 1, "a100")]
    assert mean_wait_bound_s(jobs, {"a100": 1}) == 0.5


def test_the_mean_busy_time_form_is_exact_for_one_gpu_jobs_twice_as_many_as_the_gpus():
    # 4 one-GPU jobs of 1 s on 2 GPUs at once: two wait 1 s (mean 0.5); SRPT alone says 0.25
    jobs = [BoundJob(0, 1, 1, "a100")] * 4
    assert mean_wait_bound_s(jobs, {"a100": 2}) == 0.5


def test_jobs_of_more_than_half_the_gpus_are_bounded_one_at_a_time():
    # two 3-GPU jobs of 10 s on 4 GPUs can never overlap: waits 0 and 10 at best
    jobs = [BoundJob(0, 3, 10, "a100"), BoundJob(0, 3, 10, "a100")]
    assert mean_wait_bound_s(jobs, {"a100": 4}) == 5.0


def test_the_bound_is_never_below_zero_and_zero_for_no_jobs():
    assert mean_wait_bound_s([BoundJob(0, 1, 100, "a100")], {"a100": 8}) == 0.0
    assert mean_wait_bound_s([], {"a100": 8}) == 0.0


def test_a_class_the_fleet_lacks_is_refused_by_name():
    with pytest.raises(ValueError, match="'h100'"):
        mean_wait_bound_s([BoundJob(0, 1, 1, "h100")], {"a100": 8})


def test_the_fleet_counts_every_gpu_and_every_mig_slice():
    assert fleet_units(TWIN_FLEET) == sum(
        g.count * g.gpus_per_node for c in TWIN_FLEET.clusters for g in c.node_groups
    )


POLICIES = (ClairvoyantFifo, MultiKueueRace, MultiKueueIncremental, FirstFit, OnpremFirstNoGang)


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_the_bound_is_at_or_below_the_clairvoyant_fifo_and_the_race_on_the_same_jobs(seed):
    rng = random.Random(seed)
    jobs = [job(f"j{i}", rng.randrange(0, 3600), gpus=rng.choice([1, 2, 4]),
                duration=rng.randrange(300, 3000)) for i in range(30)]
    bound = replay_wait_bound_s(jobs, TWIN_FLEET)
    for policy in POLICIES:
        run, _ = replay(TWIN_FLEET, jobs, policy())
        waits = [o.wait_s for o in run.outcomes.values()]
        assert len(waits) == len(jobs) and all(w is not None for w in waits), policy.name  # all started
        assert bound <= sum(waits) / len(waits) + 1e-6, policy.name
    assert bound > 0  # the jobs do queue: the bound says something


def test_the_replay_bound_covers_the_broker_jobs_the_policies_are_scored_on_not_the_local_ones():
    # two long 8-GPU jobs at 0 fill the twin fleet's units alone only if they are the
    # broker's; as local users' jobs they are not scored, and the lone broker job need not wait
    units = fleet_units(TWIN_FLEET)
    big = [replace(job(f"l{i}", 0, gpus=units, duration=3600), local=True) for i in range(2)]
    mine = job("b", 0, gpus=units, duration=3600)
    assert replay_wait_bound_s([*big, mine], TWIN_FLEET) == 0.0
    both_scored = [replace(j, local=False) for j in big]
    assert replay_wait_bound_s([*both_scored, mine], TWIN_FLEET) == pytest.approx(3600.0)


MIXED_FLEET = parse_fleet("""
clusters:
  - {name: lab, kind: simulator, flavor: kueue, region: eu, location: onprem, price_per_gpu_hour: 1.0,
     nodes: [{count: 1, gpu_model: L4, gpu_memory_gb: 24, gpus_per_node: 4},
             {count: 1, gpu_model: A100, gpu_memory_gb: 40, gpus_per_node: 8}]}
  - {name: cloud, kind: simulator, flavor: kueue, region: eu, location: cloud, price_per_gpu_hour: 4.0,
     nodes: [{count: 0, max_nodes: 2, gpu_model: A100, gpu_memory_gb: 80, gpus_per_node: 8}]}
""")


def test_an_elastic_pool_counts_at_its_node_maximum():
    assert fleet_units(MIXED_FLEET) == 4 + 8 + 2 * 8


def _classed(key, submit, gpu_class, memory, gpus, duration=3600.0):
    return replace(job(key, submit, gpus=gpus, duration=duration), gpu_class=gpu_class, min_memory_gb=memory)


def test_a_job_is_bounded_on_the_gpus_its_class_could_use_not_the_whole_fleet(db):
    classes = current_policy().policy.gpu_classes
    # two 4-GPU L4 jobs of an hour at once: the fleet has 28 units but only 4 L4s, so one waits an hour
    l4 = [_classed(f"l4-{i}", 0, "l4", 24, 4) for i in range(2)]
    assert replay_wait_bound_s(l4, MIXED_FLEET, classes) == pytest.approx(1800.0)
    # three 8-GPU jobs that need 80 GB: only the cloud's two elastic nodes have it, so one
    # waits an hour (mean 1,200 s); the one machine may split the third over both: 900 s
    big = [_classed(f"b{i}", 0, "a100-80gb", 80, 8) for i in range(3)]
    assert replay_wait_bound_s(big, MIXED_FLEET, classes) == pytest.approx(900.0)
    # ...while 40 GB jobs may use every A100: three fit at once
    assert replay_wait_bound_s([replace(j, gpu_class="a100-40gb", min_memory_gb=40) for j in big],
                               MIXED_FLEET, classes) == 0.0


def test_classes_that_share_gpus_are_also_bounded_together():
    # a and b each have the 4 units alone, but they share them: together one of the two waits
    jobs = [BoundJob(0, 4, 10, "a"), BoundJob(0, 4, 10, "b")]
    assert split_bound_s(jobs, lambda classes: 4) == pytest.approx(5.0)
    # on units of their own (4 each, 8 together) neither need wait
    assert split_bound_s(jobs, lambda classes: 4 * len(classes)) == 0.0


def test_a_class_no_gpu_of_the_fleet_could_serve_is_refused_by_name():
    with pytest.raises(ValueError, match="h100"):
        replay_wait_bound_s([_classed("h", 0, "h100", 80, 1)], MIXED_FLEET, {})
