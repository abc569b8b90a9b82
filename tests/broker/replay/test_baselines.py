"""The baselines behave as described, next to our preset on the same fleet."""
from __future__ import annotations

import random

from broker.backends.base import JobState
from broker.backends.sim import SimClock, SimulatorFleet
from broker.fleet_file import build_simulated_clusters, parse_fleet
from broker.replay.baselines import WORKLOAD_PREFIX, FirstFit, MultiKueueRace, OnpremFirstNoGang
from broker.replay.jobs import ReplayJob
from broker.replay.loop import ReplayEnv, run_replay
from broker.replay.runner import ORIGIN, run_one
from broker.replay.simview import FleetView
from broker.replay.tracker import Tracker

TWIN_FLEET = parse_fleet("""
clusters:
  - {name: east, kind: simulator, flavor: slurm, region: eu, location: onprem,
     price_per_gpu_hour: 1.0,
     nodes: [{count: 1, gpu_model: A100, gpu_memory_gb: 80, gpus_per_node: 4}]}
  - {name: west, kind: simulator, flavor: kueue, region: eu, location: cloud,
     price_per_gpu_hour: 3.0,
     nodes: [{count: 1, gpu_model: A100, gpu_memory_gb: 80, gpus_per_node: 4}]}
""")


def job(key: str, submit: float, gpus: int = 1, workers: int = 1,
        duration: float = 600.0) -> ReplayJob:
    return ReplayJob(key=key, submit_s=submit, tenant="t1", gpu_class="a100-80gb",
                     min_memory_gb=80, gpus_per_worker=gpus, workers=workers,
                     duration_s=duration, final_state=JobState.COMPLETED)


FRAGMENTING = [job(f"fill-{i}", 0, gpus=3, duration=3600) for i in range(4)] + [
    job("gang", 10, gpus=2, workers=2)]


def replay(fleet, jobs, strategy, seed: int = 1):
    sim = SimulatorFleet.reset(clock=SimClock(origin=ORIGIN))
    build_simulated_clusters(fleet, sim)
    view = FleetView(sim, fleet)
    env = ReplayEnv(sim=sim, view=view, tracker=Tracker(view), rng=random.Random(seed))
    return run_replay(jobs, strategy, env), sim


def test_first_fit_by_summed_free_gpus_sends_a_gang_into_fragmentation(fragmented_fleet):
    run, _ = replay(fragmented_fleet, FRAGMENTING, FirstFit())
    gang = run.outcomes["gang"]
    assert gang.fragmented and gang.cluster == "frag"   # 4 GPUs free, one per node
    assert gang.start_s == 3600                          # only when the fill jobs end


def test_onprem_first_without_gang_check_fragments_too(fragmented_fleet):
    run, _ = replay(fragmented_fleet, FRAGMENTING, OnpremFirstNoGang())
    assert run.outcomes["gang"].fragmented


def test_our_default_packs_the_gang_where_it_fits(transactional_db, fragmented_fleet):
    m = run_one("default", FRAGMENTING, fragmented_fleet, seed=1)
    assert m.fragmented == 0 and m.failed_at_destination == 0
    assert m.by_group["a100-80gb gangs"] == (1, 0.0, 0.0)  # started on arrival, in the cloud
    assert m.gpu_hours["roomy"] > 0


def test_race_tie_keeps_exactly_one_copy_and_the_losers_use_no_gpu_time():
    run, sim = replay(TWIN_FLEET, [job("only", 0)], MultiKueueRace())
    copies = [j for name in ("east", "west")
              for j in sim.get(name).jobs(WORKLOAD_PREFIX + "only")]
    assert len(copies) == 2
    assert sorted(j.state for j in copies) == sorted([JobState.COMPLETED, JobState.CANCELLED])
    winner = next(j for j in copies if j.state is JobState.COMPLETED)
    loser = next(j for j in copies if j.state is JobState.CANCELLED)
    assert run.outcomes["only"].cluster in ("east", "west") and run.outcomes["only"].wait_s == 0
    assert winner.ended_at - winner.started_at == 600 and loser.ended_at == loser.started_at
    assert sum(run.gpu_seconds.values()) == 600


def test_race_withdraws_the_waiting_copy_when_another_is_admitted():
    # east is busy until t=1000, west until t=300: the copy in west wins at 300
    jobs = [job("busy-east", 0, gpus=4, duration=1000), job("busy-west", 0, gpus=4, duration=300),
            job("late", 5, gpus=4)]
    run, sim = replay(TWIN_FLEET, jobs, MultiKueueRace())
    late = run.outcomes["late"]
    assert (late.start_s, late.copies) == (300, 2)
    states = {name: [j.state for j in sim.get(name).jobs(WORKLOAD_PREFIX + "late")]
              for name in ("east", "west")}
    assert sorted(s for v in states.values() for s in v) == sorted(
        [JobState.COMPLETED, JobState.CANCELLED])
    live = [j for name in ("east", "west") for j in sim.get(name).active_jobs()]
    assert live == []  # nothing left queued anywhere


def test_race_ties_are_decided_by_the_seed():
    winners = {seed: replay(TWIN_FLEET, [job("only", 0)], MultiKueueRace(), seed)[0]
               .outcomes["only"].cluster for seed in range(8)}
    assert set(winners.values()) == {"east", "west"}
    again = {seed: replay(TWIN_FLEET, [job("only", 0)], MultiKueueRace(), seed)[0]
             .outcomes["only"].cluster for seed in range(8)}
    assert again == winners
