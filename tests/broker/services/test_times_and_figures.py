"""One clock for the broker and its simulated clusters, and figures counted in the
run time the cluster reports (the demo's clusters run many times faster than wall time)."""
from __future__ import annotations

import time
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from accounting.chargeback import build_report
from accounting.models import UsageEntry
from accounting.periods import month_start
from accounting.services.reconciliation import broker_seconds
from accounting.services.usage import usage_collect
from broker import runtime
from broker.backends.sim import SimClock, SimulatorFleet
from broker.models import AuditRecord, Workload
from broker.placement import terms

# 60 simulated minutes pass in 0.1 s of wall time: the demo's 120x, compressed further
FAST = 36_000.0


@pytest.fixture
def wall_fleet():
    """The demo's clock: it follows the wall clock and compresses job durations."""
    return SimulatorFleet.reset(clock=SimClock(follow_wall=True, time_scale=FAST))


def _run_to_end(workload, cluster, poll, timeout_s: float = 5.0) -> Workload:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        poll(cluster)
        workload.refresh_from_db()
        if workload.state in ("completed", "failed", "cancelled"):
            return workload
        time.sleep(0.05)
    raise AssertionError(f"{workload.uid} still {workload.state} after {timeout_s} s")


def test_wall_clock_simulator_reports_the_brokers_own_time():
    instant = [timezone.now().replace(microsecond=0)]
    with runtime.override(now=lambda: instant[0]):  # the broker's clock, moved by hand: no wall clock
        clock = SimClock(follow_wall=True, time_scale=FAST)
        assert clock.now() == instant[0]
        instant[0] += timedelta(seconds=7)
        assert clock.now() == instant[0]  # it follows the broker's clock, not its own count
        clock.advance(60)  # the demo's fast-forward comes on top
        assert clock.now() == instant[0] + timedelta(seconds=60)
        instant[0] -= timedelta(seconds=30)  # the broker's clock stepped back
        assert clock.now() == instant[0] + timedelta(seconds=90)  # the simulated clock never goes back


def test_started_at_is_never_before_created_at_on_the_demo_clock(wall_fleet, make_cluster, submit, drive, poll):
    cluster = make_cluster("onprem")
    workloads = [drive(submit(name=f"train-{i}")) for i in range(3)]
    for workload in workloads:
        workload = _run_to_end(workload, cluster, poll)
        assert workload.started_at >= workload.created_at
        assert workload.ended_at >= workload.started_at


@pytest.fixture
def lagging_fleet():
    """A cluster whose clock runs 30 s behind ours: it reports starts before the submission."""
    return SimulatorFleet.reset(clock=SimClock(origin=timezone.now() - timedelta(seconds=30)))


def test_started_at_is_not_before_created_at_when_the_clusters_clock_lags(lagging_fleet, make_cluster, submit,
                                                                          drive, poll):
    cluster = make_cluster("behind")
    workload = drive(submit())
    poll(cluster)
    workload.refresh_from_db()
    assert workload.state == "running"
    assert workload.started_at >= workload.created_at


def test_sixty_simulated_minutes_are_charged_as_sixty(wall_fleet, make_cluster, submit, drive, poll):
    cluster = make_cluster("onprem", nodes=[8, 8], price="2.0")
    workload = submit(gpus_per_worker=8, workers=2, time_limit_minutes=120)
    wall_fleet.set_duration(workload.uid, 3600)  # the job runs 60 simulated minutes
    workload = _run_to_end(drive(workload), cluster, poll)

    assert workload.run_seconds == pytest.approx(3600, rel=0.01)
    assert (workload.ended_at - workload.started_at).total_seconds() < 60  # compressed wall span
    usage_collect(cluster_id=cluster.id)
    entry = UsageEntry.objects.get(workload=workload)
    assert entry.gpu_seconds == pytest.approx(16 * 3600, rel=0.01)  # 60 GPU-minutes per GPU
    assert broker_seconds(workload) == pytest.approx(16 * 3600, rel=0.01)  # reconciliation agrees
    report = build_report(months=[month_start(entry.end)], tenant_ids=None)
    assert report.totals.onprem_hours == Decimal("16.00")
    assert report.totals.onprem_cost == Decimal("32.00")


def test_ranking_gpu_cost_term_holds_after_several_runs(wall_fleet, make_cluster, submit, drive, poll):
    cluster = make_cluster("onprem", nodes=[8, 8])
    costs = []
    for i in range(5):
        workload = submit(name=f"run-{i}", gpus_per_worker=8, workers=2, time_limit_minutes=60)
        wall_fleet.set_duration(workload.uid, 3600)
        workload = drive(workload)
        decision = AuditRecord.objects.get(workload=workload, action="placement.decided")
        costs.append(decision.score_breakdown["breakdown"]["gpu_cost"])
        _run_to_end(workload, cluster, poll)
    # the history says what the time limit said: each run took its full simulated hour
    assert costs[4] == pytest.approx(costs[0], rel=0.02)
    assert costs[0] == pytest.approx(16 * 1.2 * terms.runtime_hours(_spec(workload)), rel=0.01)


def _spec(workload):
    from broker.spec import validate_spec

    return validate_spec(workload.spec)


def test_placement_decision_record_gets_the_destination_job_id(make_cluster, submit, drive):
    make_cluster("onprem")
    workload = drive(submit())
    decision = AuditRecord.objects.get(workload=workload, action="placement.decided")
    assert workload.destination_job_id
    assert decision.destination_job_id == workload.destination_job_id


def test_placement_decision_of_an_adopted_job_gets_its_id(make_cluster, submit, drive, sim):
    cluster = make_cluster("onprem")
    sim.get("onprem").set_faults(accepts_but_times_out=True)  # the job exists, the reply is lost
    workload = drive(submit())
    assert workload.destination_job_id == ""
    from broker.services.dispatching.send import workload_dispatch

    Workload.objects.filter(id=workload.id).update(updated_at=timezone.now() - timedelta(hours=1))
    workload.attempts.update(created_at=timezone.now() - timedelta(hours=1))
    workload = workload_dispatch(workload_id=workload.id)
    assert workload.destination_job_id
    decision = AuditRecord.objects.get(workload=workload, action="placement.decided", cluster=cluster.name)
    assert decision.destination_job_id == workload.destination_job_id
