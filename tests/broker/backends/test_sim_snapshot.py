"""A simulated cluster saved as JSON and restored into a fresh one (the demo's restart) schedules
on exactly as the original would have."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from broker import runtime
from broker.backends.base import JobState, ProjectIdentity
from broker.backends.sim.admission import VOLCANO_SESSION_S
from broker.backends.simulator import NodeGroup, SimClock, SimulatedCluster, SimulatorFleet
from broker.spec import WorkloadSpec

ORIGIN = datetime(2026, 1, 5, 8, 0, tzinfo=timezone.utc)
IDENT = ProjectIdentity(tenant="acme", project="vision", slurm_account="vision", k8s_namespace="vision")


def _spec(name: str, gpus: int, minutes: int = 60, priority: str = "normal", workers: int = 1) -> WorkloadSpec:
    return WorkloadSpec(project="vision", name=name, command="python train.py", gpus_per_worker=gpus,
                        workers=workers, gpu_models=("A100",), time_limit_minutes=minutes, priority=priority)


def _build(fleet: SimulatorFleet, flavor: str) -> SimulatedCluster:
    return fleet.add_cluster("c1", flavor, node_groups=[NodeGroup(count=2, gpu_model="A100", gpu_memory_gb=80,
                                                                  gpus_per_node=8)])


def _busy(fleet: SimulatorFleet, flavor: str) -> SimulatedCluster:
    """Jobs in every state: finished, running, pending behind them, cancelled, failed at its limit."""
    cluster = _build(fleet, flavor)
    for wid, seconds in (("done", 600), ("long", 3000), ("next", 1200), ("gone", 100), ("late", 900),
                         ("limit", 99_999)):
        fleet.set_duration(wid, seconds)
    cluster.submit(_spec("done", 8), "done", IDENT)
    cluster.submit(_spec("long", 8, minutes=120), "long", IDENT)
    cluster.submit(_spec("next", 8), "next", IDENT)
    gone = cluster.submit(_spec("gone", 4), "gone", IDENT)
    cluster.submit(_spec("late", 4, priority="high"), "late", IDENT)
    cluster.submit(_spec("limit", 4, minutes=30), "limit", IDENT)
    cluster.inject_foreign_job(name="theirs", gpus_per_worker=2, duration_s=500)
    fleet.advance(700)  # "done" ended at 600 and made room
    cluster.cancel(gone)
    return cluster


def _seen(cluster: SimulatedCluster) -> tuple:
    """Everything the broker can see of the cluster: every job, the inventory, usage."""
    ids = [j.job_id for j in cluster.jobs()]
    return (cluster.status(ids), cluster.inventory(),
            sorted(cluster.usage(ORIGIN - timedelta(days=1)), key=lambda u: u.job_id))


def _restored(original: SimulatedCluster, flavor: str, origin: datetime) -> tuple[SimulatorFleet, SimulatedCluster]:
    fleet = SimulatorFleet(clock=SimClock(origin=origin))
    cluster = _build(fleet, flavor)
    state = json.loads(json.dumps(original.to_json()))  # through text, as the demo stores it
    assert cluster.load_json(state) == len(original.jobs())
    return fleet, cluster


@pytest.mark.parametrize("flavor", ["slurm", "kueue", "volcano"])
def test_a_restored_cluster_schedules_on_exactly_as_the_original(flavor):
    first = SimulatorFleet(clock=SimClock(origin=ORIGIN))
    original = _busy(first, flavor)
    states = {j.job_id.rsplit("-", 1)[-1] if flavor != "slurm" else j.job_id: j.state for j in original.jobs()}
    assert set(states.values()) == {JobState.COMPLETED, JobState.RUNNING, JobState.PENDING, JobState.CANCELLED}
    # a clock with another origin: every instant is moved to it
    second, restored = _restored(original, flavor, ORIGIN - timedelta(hours=5))
    assert _seen(restored) == _seen(original)

    for step, seconds in enumerate((300, 1000, 2500, 4000)):
        for fleet, cluster in ((first, original), (second, restored)):
            fleet.advance(seconds)
            cluster.submit(_spec(f"after-{step}", 4 + 4 * (step % 2)), f"after-{step}", IDENT)
        assert _seen(restored) == _seen(original), f"after step {step}"
    second.advance(VOLCANO_SESSION_S)  # a Volcano gang's pods exist a session after it is enqueued
    ended = {j.workload_id: j.state for j in restored.jobs()}
    assert ended["limit"] is JobState.FAILED and ended["gone"] is JobState.CANCELLED
    assert ended["long"] is JobState.COMPLETED and ended["after-3"] is JobState.RUNNING


def test_a_restored_cluster_numbers_its_jobs_on_after_the_saved_ones():
    original = _busy(SimulatorFleet(clock=SimClock(origin=ORIGIN)), "slurm")
    original.number_jobs_from(5000)
    _, restored = _restored(original, "slurm", ORIGIN)
    assert restored.submit(_spec("new", 1), "new", IDENT) == original.submit(_spec("new", 1), "new", IDENT) == "5000"


def test_on_the_wall_clock_a_job_whose_end_passed_while_the_process_was_down_has_ended_then():
    instant = [ORIGIN]
    with runtime.override(now=lambda: instant[0]):
        fleet = SimulatorFleet(clock=SimClock(follow_wall=True, time_scale=120))
        cluster = _build(fleet, "slurm")
        fleet.set_duration("short", 1200)  # 10 s of wall time at 120x
        fleet.set_duration("waits", 2400)
        short = cluster.submit(_spec("short", 8, workers=2), "short", IDENT)
        waits = cluster.submit(_spec("waits", 8, workers=2), "waits", IDENT)
        fleet.clock.advance(3)  # the demo fast-forwarded: a lead over wall time
        instant[0] = ORIGIN + timedelta(seconds=4)
        state = json.loads(json.dumps(cluster.to_json()))

        instant[0] = ORIGIN + timedelta(minutes=10)  # down for ten minutes
        later = SimulatorFleet(clock=SimClock(follow_wall=True, time_scale=120))
        back = _build(later, "slurm")
        back.load_json(state)
        assert later.clock.lead_s == pytest.approx(3)
        jobs = back.status([short, waits])
    # it ended at its instant (10 s after it started, on the clock that kept its lead), not at the restart
    assert jobs[short].state is JobState.COMPLETED and jobs[short].ended_at == ORIGIN + timedelta(seconds=10)
    # the one waiting behind it started in the room it left, then, and not at the restart
    assert jobs[waits].started_at == ORIGIN + timedelta(seconds=10)
    assert jobs[waits].ended_at == ORIGIN + timedelta(seconds=30) and jobs[waits].run_s == 2400


@pytest.mark.parametrize("change, refused", [
    (lambda s: s.update(cluster="other"), "not of c1"),
    (lambda s: s["nodes"].update({"gone-01": s["nodes"]["a100-80gb-01"]}), "no longer has nodes"),
    (lambda s: s.update(version=99), "version 99"),
    (lambda s: next(j for j in s["jobs"] if j["state"] == "running").update(pool=None), "without the pool"),
])
def test_a_state_that_does_not_fit_the_cluster_is_refused_and_changes_nothing(change, refused):
    original = _busy(SimulatorFleet(clock=SimClock(origin=ORIGIN)), "slurm")
    state = original.to_json()
    change(state)
    fresh = _build(SimulatorFleet(clock=SimClock(origin=ORIGIN)), "slurm")
    with pytest.raises(ValueError, match=refused):
        fresh.load_json(state)
    assert fresh.jobs() == [] and all(n.allocated == 0 for n in fresh.nodes)


def test_a_cluster_that_already_has_jobs_refuses_a_restore():
    original = _busy(SimulatorFleet(clock=SimClock(origin=ORIGIN)), "slurm")
    with pytest.raises(ValueError, match="already has jobs"):
        original.load_json(original.to_json())
