"""Metrics: computed from the ground truth, checked against hand-worked numbers."""
from __future__ import annotations

import pytest

from broker.backends.base import JobState
from broker.fleet_file import parse_fleet
from broker.replay.jobs import ReplayJob
from broker.replay.loop import ReplayRun
from broker.replay.metrics import compute, percentile
from broker.replay.runner import run_one
from broker.replay.simview import FRAGMENTATION, QUEUE
from broker.replay.tracker import Outcome

FLEET = parse_fleet("""
clusters:
  - {name: home, kind: simulator, flavor: slurm, region: eu, location: onprem,
     price_per_gpu_hour: 1.0, image_pull_s: 30,
     nodes: [{count: 1, gpu_model: A100, gpu_memory_gb: 80, gpus_per_node: 2}]}
  - {name: cloud, kind: simulator, flavor: kueue, region: eu, location: cloud,
     price_per_gpu_hour: 3.6, image_pull_s: 60, provisioning_s: 240,
     nodes: [{count: 1, gpu_model: A100, gpu_memory_gb: 80, gpus_per_node: 2}]}
""")


def job(key: str, submit: float, gpus: int = 1, workers: int = 1,
        duration: float = 100.0) -> ReplayJob:
    return ReplayJob(key=key, submit_s=submit, tenant="t1", gpu_class="a100-80gb",
                     min_memory_gb=80, gpus_per_worker=gpus, workers=workers,
                     duration_s=duration, final_state=JobState.COMPLETED)


def test_percentile_is_nearest_rank():
    assert percentile([], 95) == 0.0
    assert percentile([5.0], 95) == 5.0
    assert percentile(list(range(1, 21)), 95) == 19
    assert percentile(list(range(1, 101)), 95) == 95


def test_waits_ttfg_failures_hours_spend_and_utilisation():
    outcomes = {
        "a": Outcome(job("a", 0), start_s=0, cluster="home", dispatched_s=0, copies=1),
        "b": Outcome(job("b", 0), start_s=600, cluster="cloud", dispatched_s=0, copies=1,
                     issues=[QUEUE]),
        "c": Outcome(job("c", 100, gpus=2, workers=2), start_s=200, cluster="home",
                     dispatched_s=100, copies=1, issues=[FRAGMENTATION]),
        "d": Outcome(job("d", 200), rejected=1),          # refused, never ran
    }
    usage = [("home", 0, 100, 1), ("cloud", 600, 4200, 1), ("home", 150, 300, 4)]
    run = ReplayRun("x", outcomes, end_s=4200, gpu_seconds={"home": 500, "cloud": 3600},
                    usage=usage)
    m = compute(run, FLEET)
    assert (m.jobs, m.started, m.never_placed) == (4, 3, 1)
    assert m.mean_wait_s == pytest.approx((0 + 600 + 100) / 3) and m.p95_wait_s == 600
    assert m.p95_gang_wait_s == 100
    # startup: home 30 s; cloud 60 + 240 s
    assert m.mean_ttfg_s == pytest.approx((30 + 900 + 130) / 3) and m.p95_ttfg_s == 900
    failures = (m.fragmented, m.rejected, m.failed_at_destination, m.held_at_destination)
    assert failures == (1, 1, 2, 1)
    assert m.gpu_hours == {"home": pytest.approx(500 / 3600), "cloud": 1.0}
    assert m.cloud_spend == pytest.approx(3.6)
    # busy window: 5th..95th percentile of arrivals = 0..200 s, 4 whole GPUs; the
    # cloud job runs after it, the gang half inside it
    assert m.utilisation == pytest.approx((100 + 0 + 4 * 50) / (4 * 200))
    assert m.by_group["a100-80gb single"][0] == 2


def test_a_copy_held_while_another_started_at_once_is_not_a_failure():
    raced = Outcome(job("r", 0), start_s=0, cluster="home", dispatched_s=0, copies=2,
                    issues=[FRAGMENTATION])
    assert not raced.held_at_destination and not raced.fragmented


def test_end_to_end_waits_and_hours_on_one_small_node(transactional_db):
    # one 2-GPU node: "b" waits for "a" to end at t=100 -> wait 90 s
    fleet = parse_fleet("""
clusters:
  - {name: only, kind: simulator, flavor: slurm, region: eu, location: cloud,
     price_per_gpu_hour: 3.6,
     nodes: [{count: 1, gpu_model: A100, gpu_memory_gb: 80, gpus_per_node: 2}]}
""")
    jobs = [job("a", 0, gpus=2, duration=100), job("b", 10, gpus=1, duration=50)]
    # the broker in the production loop learns that "a" ended at the next inventory sync
    # (every 30 s: at t=120), the instant harness right away; the baseline reacts at once
    expected = {("first-fit", "production"): (45.0, 90.0), ("default", "instant"): (45.0, 90.0),
                ("default", "production"): (55.0, 110.0)}
    for (policy, loop), waits in expected.items():
        m = run_one(policy, jobs, fleet, seed=1, loop=loop)
        assert (m.mean_wait_s, m.p95_wait_s, m.never_placed) == (*waits, 0), policy
        assert m.gpu_hours["only"] == pytest.approx(250 / 3600), policy
        assert m.cloud_spend == pytest.approx(0.25), policy


def test_the_median_wait_and_the_worst_treated_tenants_slowdown():
    def tenant_job(key: str, tenant: str, duration: float) -> ReplayJob:
        return ReplayJob(key=key, submit_s=0, tenant=tenant, gpu_class="a100-80gb", min_memory_gb=80,
                         gpus_per_worker=1, workers=1, duration_s=duration, final_state=JobState.COMPLETED)

    outcomes = {
        # alice: (0+100)/100 = 1 and (300+100)/100 = 4 -> mean 2.5
        "a1": Outcome(tenant_job("a1", "alice", 100), start_s=0, cluster="home"),
        "a2": Outcome(tenant_job("a2", "alice", 100), start_s=300, cluster="home"),
        # bob: a 2-s job counts as 10 s (bounded slowdown): (20+10)/10 = 3
        "b1": Outcome(tenant_job("b1", "bob", 2), start_s=20, cluster="home"),
        "b2": Outcome(tenant_job("b2", "bob", 50)),  # never started: not in anyone's slowdown
    }
    m = compute(ReplayRun("x", outcomes, end_s=500, gpu_seconds={}, usage=[]), FLEET)
    assert m.p50_wait_s == 20  # nearest rank of 0, 20, 300
    assert (m.worst_tenant, m.worst_tenant_slowdown) == ("bob", pytest.approx(3.0))


def test_gangs_are_also_reported_by_shape():
    from broker.replay.metrics import by_gang_shape  # noqa: PLC0415
    from broker.replay.tracker import Outcome  # noqa: PLC0415

    def gang(key, workers, gpus, wait):
        j = job(key, 0, gpus=gpus, duration=60)
        from dataclasses import replace  # noqa: PLC0415
        return Outcome(replace(j, workers=workers, gpus_per_worker=gpus), start_s=wait)

    shapes = by_gang_shape([gang("a", 2, 4, 60), gang("b", 2, 4, 180), gang("c", 4, 2, 0), Outcome(job("d", 0), start_s=5)])
    assert shapes == {"2x4": (2, 120.0, 180.0), "4x2": (1, 0.0, 0.0)}
