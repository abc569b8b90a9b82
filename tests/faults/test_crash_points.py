"""One test per named crash point: the harness injects only that fault, and every invariant
count stays at zero; the points of the services fire at their named failpoints
(broker/failpoints.py).  On PostgreSQL, those runs and one harness run over every failpoint
give the same counts, all zero.  Then the crash points whose recovery needed a fix, step by
step."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import TestCase
from django.utils import timezone

from broker.failpoints import FAILPOINTS
from broker.faults.harness import HarnessConfig, run_harness
from broker.faults.points import CRASH_POINTS, POINTS_BY_NAME, Crash, hooks_matching
from broker.models import AttemptState, DispatchAttempt, Reservation, Workload

from .conftest import crashes

HARNESS_POINTS = [p.name for p in CRASH_POINTS]
# the points that crash a service at its failpoints (the rest: the environment, or any hook)
FAILPOINT_POINTS = [p.name for p in CRASH_POINTS
                    if p.hook and p.hook != "*" and set(hooks_matching(p.hook)) <= set(FAILPOINTS)]
HARNESS_FAILPOINTS = {name for name in FAILPOINTS if not name.startswith("multikueue.")}  # no manager here


def _at_its_failpoints(point: str) -> set[str]:
    hook = POINTS_BY_NAME[point].hook
    return set(hooks_matching(hook)) if hook else set()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("point", HARNESS_POINTS)
def test_crash_point_alone_breaks_no_invariant(point):
    report = run_harness(HarnessConfig(workloads=10, faults=2, seed=11, points=(point,), cancel_share=0.5))
    assert report.faults_by_point.get(point, 0) >= 2, report.table()
    assert all(v == 0 for v in report.counts.values()), report.table()
    if point in FAILPOINT_POINTS:  # injected through the service's own failpoints, nowhere else
        assert report.faults_by_failpoint and set(report.faults_by_failpoint) <= _at_its_failpoints(point)
        assert sum(report.faults_by_failpoint.values()) == report.faults_by_point[point]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_on_postgresql_the_crash_point_runs_and_the_harness_give_the_same_counts_through_the_failpoints():
    from django.core.management import call_command
    from django.db import connection

    assert connection.vendor == "postgresql"
    alone = {}
    for point in FAILPOINT_POINTS:
        alone[point] = run_harness(HarnessConfig(workloads=10, faults=1, seed=11, points=(point,), cancel_share=0.5))
        call_command("flush", interactive=False, verbosity=0)
    together = run_harness(HarnessConfig(workloads=40, faults=3 * len(FAILPOINT_POINTS), seed=11,
                                         points=tuple(FAILPOINT_POINTS), cancel_share=0.5))
    zero = dict.fromkeys(together.counts, 0)
    assert zero and together.counts == zero, together.table()
    assert {p: r.counts for p, r in alone.items()} == dict.fromkeys(FAILPOINT_POINTS, zero)
    assert all(r.faults_by_point.get(p, 0) >= 1 for p, r in alone.items())
    assert set(together.faults_by_point) == set(FAILPOINT_POINTS) and all(together.faults_by_point.values())
    # every failpoint of the services was crashed, by the crash-point runs and by the harness alike
    # (a look-up of a due reservation is rare in a run: during_reconcile hits it when there is
    # one, and test_crash_before_looking_up_a_due_reservation_decides_nothing always does)
    by_alone = set().union(*(r.faults_by_failpoint for r in alone.values()))
    for fired in (by_alone, set(together.faults_by_failpoint)):
        assert HARNESS_FAILPOINTS - {"reconcile.before_lookup"} <= fired <= HARNESS_FAILPOINTS, fired


# --- the windows that were open before dispatch refused to send unreserved work -------------

def _past(seconds: int = 600):
    return timezone.now() - timedelta(seconds=seconds)


def test_crash_after_expiring_a_reservation_never_dispatches_without_one(sim_cluster, submit, plan, tasks, sim):
    from broker.services.dispatching.send import workload_dispatch
    from broker.services.placing.cycle import workload_place
    from broker.services.following.reconcile import reconcile_fleet

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


def test_crash_before_looking_up_a_due_reservation_decides_nothing(sim_cluster, submit, plan, tasks, sim):
    from broker.services.dispatching.send import workload_dispatch
    from broker.services.placing.cycle import workload_place
    from broker.services.following.reconcile import reconcile_fleet

    sim_cluster("onprem")
    workload = workload_place(workload_id=submit().id)
    plan.unreachable.add("onprem")
    workload = workload_dispatch(workload_id=workload.id)            # no answer: attempt unknown
    Reservation.objects.filter(workload=workload).update(expires_at=_past(1))
    Workload.objects.filter(id=workload.id).update(updated_at=_past())
    DispatchAttempt.objects.filter(workload=workload).update(created_at=_past())
    plan.unreachable.clear()

    plan.arm("during_reconcile")                                     # reconcile.before_*: the look-up comes first
    assert crashes(reconcile_fleet)
    assert [f.hook for f in plan.fired] == ["reconcile.before_lookup"]
    workload.refresh_from_db()
    assert workload.state == "dispatching"                           # nothing decided without the answer
    assert Reservation.objects.get(workload=workload).state == "active"

    with TestCase.captureOnCommitCallbacks(execute=True):
        reconcile_fleet()                                            # the restarted broker looks it up
    workload.refresh_from_db()
    assert Reservation.objects.get(workload=workload).state == "expired" and workload.state == "waiting"
    assert ("place_workload", (workload.id,)) in tasks
    assert sim.get("onprem").jobs(workload.uid) == []


def test_crash_between_a_rejection_and_re_placing_never_sends_unreserved(sim_cluster, submit, plan, tasks, sim):
    from broker.faults.arming import _reject
    from broker.services.dispatching.send import workload_dispatch
    from broker.services.placing.cycle import workload_place

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
