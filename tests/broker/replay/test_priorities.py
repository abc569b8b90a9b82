"""The replay's priority scenario: fleet priority classes over the jobs, the broker owning
preemption in the production loop, minimum shares, and what preemption cost the preempted."""
from __future__ import annotations

import random

import pytest

from broker.fleet_file import parse_fleet
from broker.replay.jobs import ReplayJob
from broker.replay.local_jobs import mark_local
from broker.replay.metrics import by_priority_class, preemption_cost
from broker.replay.priorities import (
    PREEMPT_VARIANT,
    PriorityScenario,
    check_mix,
    mark_priorities,
    parse_priorities,
    parse_shares,
)
from broker.replay.production import Skipping
from broker.replay.runner import ReplayConfig, replay_run

from .conftest import FRAGMENTED_FLEET, busy_slice

MIX = {"production": 0.15, "scavenger": 0.45}


def _jobs(n: int, seed: int, mix: dict[str, float] | None = None, local: float = 0.2) -> list[ReplayJob]:
    """A busy slice on the fragmented fleet: arrivals every 0-60 s, runs of 20-90 minutes."""
    rng = random.Random(seed)
    jobs = busy_slice(n, rng, gap_s=60, minutes=(20, 90), gang_every=6, gang_gpus=lambda: 2,
                      single_gpus=lambda: rng.choice([1, 2, 4]))
    return mark_priorities(mark_local(jobs, local, seed), mix or {}, seed)


def _fleet():
    return parse_fleet(FRAGMENTED_FLEET, source="fragmented")


def test_the_mix_is_drawn_per_job_from_the_seed_so_every_policy_meets_the_same_classes():
    jobs = _jobs(400, seed=4)
    once, again = mark_priorities(jobs, MIX, 9), mark_priorities(jobs, MIX, 9)
    assert [j.priority_class for j in once] == [j.priority_class for j in again]
    shares = {c: sum(j.priority_class == c for j in once) / len(once) for c in ("production", "scavenger", "")}
    assert 0.10 < shares["production"] < 0.20 and 0.38 < shares["scavenger"] < 0.52
    assert once[0].spec_data().get("priority_class", "") == once[0].priority_class


def test_bad_scenario_options_are_refused_naming_the_option():
    with pytest.raises(ValueError, match="--priority-mix: 'production' is not NAME=SHARE"):
        parse_shares("production", "--priority-mix")
    with pytest.raises(ValueError, match="--min-share: 't0=2': a share from 0 to 1"):
        parse_shares("t0=2", "--min-share")
    with pytest.raises(ValueError, match="--preemptible: 'urgent' is not a priority"):
        parse_priorities("low,urgent", "--preemptible")
    with pytest.raises(ValueError, match="'gold' is not a priority class"):
        check_mix({"gold": 0.1}, ("production", "normal", "scavenger"))
    with pytest.raises(ValueError, match="add up to more than 1"):
        check_mix({"production": 0.6, "scavenger": 0.6}, ("production", "normal", "scavenger"))
    with pytest.raises(ValueError, match="production loop"):
        ReplayConfig(trace="t.csv", fleet="f.yaml", policies=(PREEMPT_VARIANT,), loop="instant")


def test_with_the_broker_owning_preemption_production_work_waits_less_and_only_scavenger_work_pays(
    transactional_db,
):
    fleet, jobs = _fleet(), _jobs(36, seed=5, mix=MIX)
    without = replay_run("default", jobs, fleet, seed=5)
    with_ = replay_run(PREEMPT_VARIANT, jobs, fleet, seed=5)
    assert preemption_cost(list(without.outcomes.values()))["preempted jobs"] == 0
    cost = preemption_cost(list(with_.outcomes.values()))
    hit = [o for o in with_.outcomes.values() if o.preempted]
    assert cost["preempted jobs"] == len(hit) > 0 and cost["GPU-h lost to preemption"] >= 0
    # only the broker's own preemptible (scavenger: low) work, never a local user's job
    assert {o.job.priority_class for o in hit} == {"scavenger"}
    assert not any(o.preempted for o in with_.local_outcomes.values())
    # each preempted job ran again to its end, later than had it run at once
    assert cost["preempted never ended"] == 0
    assert all(o.end_s > o.job.submit_s + o.job.duration_s for o in hit)
    assert sum(o.lost_gpu_s for o in hit) > 0
    p95 = {name: by_priority_class(list(run.outcomes.values()))["production"][2] for name, run in
           (("without", without), ("with", with_))}
    assert p95["with"] < p95["without"], p95


def test_skipped_passes_change_no_decision_with_the_broker_preempting(transactional_db):
    fleet, jobs = _fleet(), _jobs(30, seed=6, mix=MIX)
    every = replay_run(PREEMPT_VARIANT, jobs, fleet, seed=6, skipping=Skipping(on=False))
    skipping = replay_run(PREEMPT_VARIANT, jobs, fleet, seed=6, skipping=Skipping(on=True))

    def decisions(run):
        return {k: (o.cluster, o.start_s, o.dispatched_s, o.copies, o.preempted, o.end_s)
                for k, o in sorted(run.outcomes.items())}

    assert decisions(skipping) == decisions(every)
    assert sum(o.preempted for o in every.outcomes.values()) > 0  # the slice does preempt


def test_a_tenant_under_its_minimum_share_reclaims_from_tenants_above_theirs(transactional_db):
    # every job at the same priority: only the guarantee may preempt (normal made preemptible)
    fleet, jobs = _fleet(), _jobs(36, seed=7)
    scenario = PriorityScenario(min_shares={"t0": 0.5}, preemptible=("low", "normal"))
    without = replay_run("default", jobs, fleet, seed=7, scenario=scenario)
    with_ = replay_run(PREEMPT_VARIANT, jobs, fleet, seed=7, scenario=scenario)
    hit = [o for o in with_.outcomes.values() if o.preempted]
    assert hit and {o.job.tenant for o in hit} <= {"t1", "t2"}
    assert not any(o.preempted for o in without.outcomes.values())

    def mean_wait(run, tenant):
        waits = [o.wait_s for o in run.outcomes.values() if o.job.tenant == tenant and o.wait_s is not None]
        return sum(waits) / len(waits)

    assert mean_wait(with_, "t0") < mean_wait(without, "t0")
