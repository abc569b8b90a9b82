"""The production-loop replay: the broker runs as beat and a worker run it, learns only from
its own syncs and polls, and the harness's shortcuts (elided syncs and polls, skipped passes,
ticks passed over) change no decision."""
from __future__ import annotations

import random

import pytest

from django.conf import settings

from broker.fleet_file import parse_fleet
from broker.replay.jobs import ReplayJob
from broker.replay import local_jobs
from broker.replay.local_jobs import mark_local
from broker.replay.production import BEAT_ORDER, NOT_REPLAYED, ReplayStuck, Skipping, beat_intervals
from broker.replay.runner import replay_run
from broker.services.fleet.policy import current_policy, policy_override

from .conftest import FRAGMENTED_FLEET, busy_slice


def _jobs(n: int, seed: int = 3, gap_s: int = 90, minutes: tuple[int, int] = (5, 60)) -> list[ReplayJob]:
    """A busy slice: arrivals every 0-``gap_s`` s (90), runs of ``minutes`` (5-60), a gang in five."""
    rng = random.Random(seed)
    jobs = busy_slice(n, rng, gap_s=gap_s, minutes=minutes, gang_every=5, gang_gpus=lambda: rng.choice([2, 4]),
                      single_gpus=lambda: rng.choice([1, 2, 3, 4]))
    return mark_local(jobs, 0.3, seed)


def _decisions(run) -> dict[str, tuple]:
    return {k: (o.cluster, o.start_s, o.dispatched_s, o.copies, o.rejected) for k, o in sorted(run.outcomes.items())}


def test_every_beat_entry_is_either_replayed_or_left_out_with_a_reason():
    assert set(BEAT_ORDER) | set(NOT_REPLAYED) == set(settings.CELERY_BEAT_SCHEDULE)
    assert not set(BEAT_ORDER) & set(NOT_REPLAYED)
    assert beat_intervals()["inventory"] == float(settings.GPUBROKER_INVENTORY_INTERVAL_S)


def test_skipped_passes_elided_syncs_and_ticks_passed_over_change_no_decision(transactional_db):
    # transactional: the services hand their follow-ups to the worker after a real commit
    fleet = parse_fleet(FRAGMENTED_FLEET, source="fragmented")
    # 50 jobs packed closer and shorter than the smoke's: as contended (25 of the 33 the broker
    # is sent wait), about 30 s of CPU for both runs; the 500-job version is in bench/
    jobs = _jobs(50, gap_s=45, minutes=(5, 30))
    every = replay_run("default", jobs, fleet, seed=3, skipping=Skipping(on=False))
    skipping = replay_run("default", jobs, fleet, seed=3, skipping=Skipping(on=True))
    assert _decisions(skipping) == _decisions(every)
    waited = [o for o in every.outcomes.values() if o.start_s is not None and o.start_s > o.job.submit_s]
    assert len(waited) >= 10  # contended: the slice tests the passes, not only placement at arrival
    assert {o.start_s for o in every.local_outcomes.values()} == {o.start_s for o in skipping.local_outcomes.values()}


def test_inside_an_uncommitted_transaction_the_production_loop_refuses_rather_than_place_nothing(db):
    # the follow-ups (place at once, dispatch) reach the worker only after a commit
    fleet = parse_fleet(FRAGMENTED_FLEET, source="fragmented")
    with pytest.raises(RuntimeError, match="committed"):
        replay_run("default", _jobs(3), fleet, seed=3)


def test_a_200_job_smoke_replay_of_the_production_loop_places_every_job_the_broker_is_sent(transactional_db):
    fleet = parse_fleet(FRAGMENTED_FLEET, source="fragmented")
    jobs = _jobs(200, seed=5)
    run = replay_run("default", jobs, fleet, seed=5)
    assert len(run.outcomes) + len(run.local_outcomes) == 200
    assert all(o.start_s is not None for o in run.outcomes.values())
    assert all(o.start_s is not None for o in run.local_outcomes.values())
    assert run.extra["held at broker"] == 0 and run.extra["rejected by broker"] == 0
    # the broker heard of an end only at its next poll and sync: never before the cluster freed it
    waited = [o for o in run.outcomes.values() if o.start_s > o.job.submit_s]
    assert len(waited) >= 40 and all(o.start_s >= o.dispatched_s for o in run.outcomes.values())
    assert run.extra["local jobs"] == len(run.local_outcomes) > 30


def _with_budget(kind: str) -> str:
    text = current_policy().text
    start = text.index("\nbudgets:\n")
    end = text.index("\n\n", start + 1)
    return (text[:start] + f"\nbudgets:\n  - {{tenant: replay-t0, gpu_class: a100-80gb, gpu_hours: 1, kind: {kind}}}"
            + text[end:])


def test_a_budget_on_a_replay_tenant_is_refused_soft_or_hard(transactional_db):
    # the replay collects no ledger to hold a budget against (and a soft one, reading the
    # clock at each submission, moved dispatch instants under skipping); the default policy's
    # budget is on physics, no replay tenant, and reads nothing at their submissions
    fleet = parse_fleet(FRAGMENTED_FLEET, source="fragmented")
    for kind in ("soft", "hard"):
        with policy_override(_with_budget(kind)), pytest.raises(ValueError, match="budgets"):
            replay_run("default", _jobs(3, seed=7), fleet, seed=7)


STUCK_FLEET = """
clusters:
  - {name: capped, kind: simulator, flavor: kueue, region: eu-west, location: onprem, price_per_gpu_hour: 1.0,
     nodes: [{count: 2, gpu_model: A100, gpu_memory_gb: 80, gpus_per_node: 8, quota: 8, name_prefix: capped-}]}
"""


def test_a_replay_whose_jobs_can_never_start_stops_with_an_error_naming_them(transactional_db, monkeypatch):
    # a local user sends a 2 x 8 gang to a ClusterQueue with 8 GPUs of quota (the harness's
    # choice of home would not: made to here), so the quota never admits it and nothing runs
    # that could end; such a replay used to step through inventory syncs for ever (an elastic
    # pool asked for nodes of the wrong class did this in a sweep)
    monkeypatch.setattr(local_jobs, "home_of", lambda view, job, seed: "capped")
    fleet = parse_fleet(STUCK_FLEET, source="stuck")
    gang = ReplayJob(key="big-gang", submit_s=0.0, tenant="t0", gpu_class="a100-80gb", min_memory_gb=80,
                     gpus_per_worker=8, workers=2, duration_s=600.0, local=True)
    with pytest.raises(ReplayStuck, match=r"1 job\(s\) still wait and never can: capped: local-"):
        replay_run("default", [gang], fleet, seed=3)
