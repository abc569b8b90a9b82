"""One test per named crash point: the harness injects only that fault, and every invariant
count stays at zero.  Then the crash points whose recovery needed a fix, step by step."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import TestCase
from django.utils import timezone

from broker.faults.harness import HarnessConfig, run_harness
from broker.faults.points import CRASH_POINTS, Crash
from broker.models import AttemptState, DispatchAttempt, Reservation, Workload

from .conftest import crashes

HARNESS_POINTS = [p.name for p in CRASH_POINTS]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("point", HARNESS_POINTS)
def test_crash_point_alone_breaks_no_invariant(point):
    report = run_harness(HarnessConfig(workloads=10, faults=2, seed=11, points=(point,), cancel_share=0.5))
    assert report.faults_by_point.get(point, 0) >= 2, report.table()
    assert all(v == 0 for v in report.counts.values()), report.table()


# --- the windows that were open before dispatch refused to send unreserved work -------------

def _past(seconds: int = 600):
    return timezone.now() - timedelta(seconds=seconds)


def test_crash_after_expiring_a_reservation_never_dispatches_without_one(sim_cluster, submit, plan, tasks, sim):
    from broker.services.dispatch import workload_dispatch
    from broker.services.placing import workload_place
    from broker.services.reconcile import reconcile_fleet

    sim_cluster("onprem")
    workload = workload_place(workload_id=submit().id)
    plan.unreachable.add("onprem")
    workload = workload_dispatch(workload_id=workload.id)            # no answer: attempt unknown
    assert DispatchAttempt.objects.get(workload=workload).state == AttemptState.UNKNOWN
    Reservation.objects.filter(workload=workload).update(expires_at=_past(1))
    Workload.objects.filter(id=workload.id).update(updated_at=_past())
    DispatchAttempt.objects.filter(workload=workload).update(created_at=_past())
    plan.unreachable.clear()

    plan.arm("reconcile_after_expire")
    assert crashes(reconcile_fleet)                                  # dies between the two writes
    workload.refresh_from_db()
    assert workload.state == "dispatching"
    assert not Reservation.objects.filter(workload=workload, state__in=("active", "confirmed")).exists()

    with TestCase.captureOnCommitCallbacks(execute=True):
        reconcile_fleet()                                            # the restarted broker
    assert ("dispatch_workload", (workload.id,)) in tasks            # reconcile decides, the task acts
    workload_dispatch(workload_id=workload.id)
    workload.refresh_from_db()
    assert sim.get("onprem").jobs(workload.uid) == []                # nothing sent unreserved
    assert workload.state == "waiting"
    assert DispatchAttempt.objects.filter(workload=workload).order_by("-number").first().error.startswith(
        "not sent: no live quota reservation")

    workload = workload_place(workload_id=workload.id)               # placed again, reserved again
    workload = workload_dispatch(workload_id=workload.id)
    assert workload.state == "queued" and len(sim.get("onprem").jobs(workload.uid)) == 1
    assert Reservation.objects.get(workload=workload, state="confirmed")


def test_crash_between_a_rejection_and_re_placing_never_sends_unreserved(sim_cluster, submit, plan, tasks, sim):
    from broker.faults.arming import _reject
    from broker.services.dispatch import workload_dispatch
    from broker.services.placing import workload_place

    sim_cluster("onprem")
    sim_cluster("other", price="2.0")
    workload = workload_place(workload_id=submit().id)
    assert workload.cluster.name == "onprem"
    plan.arm("(setup)", hook="submit:before", action=_reject)
    plan.arm("after_reject_before_replace")
    assert crashes(workload_dispatch, workload_id=workload.id)
    workload.refresh_from_db()
    assert workload.state == "dispatching"                            # reservation already released
    assert not Reservation.objects.filter(workload=workload, state__in=("active", "confirmed")).exists()

    workload = workload_dispatch(workload_id=workload.id)             # the task, redelivered
    workload.refresh_from_db()
    assert workload.state == "waiting"
    assert sim.get("onprem").jobs(workload.uid) == [] and sim.get("other").jobs(workload.uid) == []
    for _ in range(3):
        workload = workload_place(workload_id=workload.id)
        if workload.state == "reserved":
            workload = workload_dispatch(workload_id=workload.id)
    workload.refresh_from_db()
    assert workload.state == "queued"
    jobs = sim.get("onprem").jobs(workload.uid) + sim.get("other").jobs(workload.uid)
    assert len(jobs) == 1
    assert Reservation.objects.get(workload=workload, state="confirmed").gpus == workload.total_gpus


def test_crash_is_not_an_exception_the_services_can_swallow():
    assert not issubclass(Crash, Exception)
