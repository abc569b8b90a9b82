"""Reconcile decides, tasks act: a pass over slow clusters calls each once, keeps to its
budget and its cap, records its run, and leaves the cluster work to the tasks it enqueues.

The clusters are slowed through the clock seam: each of their answers moves a test clock on
by the simulated delay instead of sleeping, so a count of the waits is a count of the remote
calls, and the budget is checked on the same clock the pass reads.
"""
from __future__ import annotations

from datetime import datetime, timedelta

from django.test import TestCase
from django.utils import timezone

from broker import runtime
from broker.models import ReconcileRun, Workload
from broker.services.following.reconcile import reconcile_fleet
from broker.services.submitting.workloads import workload_cancel

SLOW_S = 5.0


class _SlowClock:
    """A clock that moves only when someone waits on it; it counts the waits."""

    def __init__(self) -> None:
        self.at = timezone.now()
        self.waits: list[float] = []

    def now(self) -> datetime:
        return self.at

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.at += timedelta(seconds=seconds)


def _cancelling(count: int, submit, drive, trio) -> list[int]:
    ids = []
    for i in range(count):
        workload = drive(submit(name=f"w{i}", gpus_per_worker=1))
        assert workload.state in ("queued", "running")
        ids.append(workload_cancel(user=trio.member, workload_id=workload.id).id)  # its propagation is not run
    assert set(Workload.objects.filter(id__in=ids).values_list("state", flat=True)) == {"cancelling"}
    return ids


def test_reconcile_over_50_cancellations_on_a_slow_cluster_calls_it_once_within_budget_and_the_tasks_cancel(
        make_cluster, submit, drive, trio, sim):
    make_cluster("slowhpc", nodes=[8] * 7)
    ids = _cancelling(50, submit, drive, trio)
    sim.get("slowhpc").set_faults(slow_s=SLOW_S)
    clock = _SlowClock()
    started = clock.at

    with runtime.override(now=clock.now, sleep=clock.sleep):
        with TestCase.captureOnCommitCallbacks() as follow_ups:
            report = reconcile_fleet(budget_s=60, max_follow_ups=100)
        assert clock.waits == [SLOW_S]  # one remote call: the listing of the cluster's jobs
        assert clock.at - started <= timedelta(seconds=60) and not report.cut_short
        assert report.cancels_retried == 50 and len(follow_ups) == 50 and report.left == {}
        run = ReconcileRun.objects.get()
        assert run.report["cancels_retried"] == 50 and run.finished_at <= started + timedelta(seconds=60)
        assert set(Workload.objects.filter(id__in=ids).values_list("state", flat=True)) == {"cancelling"}

        for follow_up in follow_ups:  # the worker: each task makes its own (slow) call
            follow_up()

    assert set(Workload.objects.filter(id__in=ids).values_list("state", flat=True)) == {"cancelled"}
    assert len(clock.waits) == 1 + 50
    jobs = [job for job in sim.get("slowhpc").jobs() if job.workload_id]
    assert len(jobs) == 50 and {job.state.value for job in jobs} == {"cancelled"}


def test_reconcile_cut_short_by_its_budget_or_its_cap_records_the_run_and_what_it_left(
        make_cluster, submit, drive, trio, sim):
    make_cluster("slow-a", nodes=[8, 8])
    make_cluster("slow-b", nodes=[8, 8], price="9")
    _cancelling(12, submit, drive, trio)
    for name in ("slow-a", "slow-b"):
        sim.get(name).set_faults(slow_s=SLOW_S)
    clock = _SlowClock()

    with runtime.override(now=clock.now, sleep=clock.sleep):
        with TestCase.captureOnCommitCallbacks() as follow_ups:
            report = reconcile_fleet(budget_s=SLOW_S, max_follow_ups=5)

    assert len(clock.waits) == 1  # the first listing spent the budget; the second cluster waits
    assert report.cut_short and report.left == {"cancellations": 7, "orphans": 1}
    assert report.cancels_retried == 5 and len(follow_ups) == 5
    assert ReconcileRun.objects.get().report["left"] == {"cancellations": 7, "orphans": 1}
