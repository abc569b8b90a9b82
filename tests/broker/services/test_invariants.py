"""The invariants of DESIGN.md, each shown by the behaviour a user would notice."""
from __future__ import annotations

from datetime import timedelta

from django.test import TestCase
from django.utils import timezone

from broker.models import (
    AttemptState, Cluster, DispatchAttempt, Escalation, Reservation, Workload,
)
from broker.services.dispatching.send import workload_dispatch
from broker.services.fleet.inventory import cluster_sync_inventory
from broker.services.following.reconcile import ReconcileReport, reconcile_fleet
from broker.services.submitting.workloads import workload_cancel


def _reconcile() -> ReconcileReport:
    """A reconcile pass, then the dispatch and cancel tasks it enqueued (eager: run here)."""
    with TestCase.captureOnCommitCallbacks(execute=True):
        return reconcile_fleet()


def _backdate(workload: Workload, seconds: int = 600) -> None:
    past = timezone.now() - timedelta(seconds=seconds)
    Workload.objects.filter(id=workload.id).update(updated_at=past)
    DispatchAttempt.objects.filter(workload=workload).update(created_at=past)


# --- invariant 1: one allocation owner per pool ------------------------------------------

def test_node_reported_by_two_schedulers_is_escalated_and_not_used(make_cluster, submit, drive, sim):
    cluster = make_cluster("onprem", nodes=[8])
    sim.get("onprem").claim_node_by("kueue", "onprem-n0-01")
    cluster_sync_inventory(cluster_id=cluster.id)
    esc = Escalation.objects.get(kind="double_claim")
    assert esc.evidence["node"] == "onprem-n0-01" and sorted(esc.evidence["claimed_by"]) == ["kueue", "slurm"]
    workload = drive(submit(gpus_per_worker=8))
    assert workload.state == "waiting" and workload.cluster is None


# --- invariant 3: at most one live destination job ----------------------------------------

def test_lost_reply_then_crash_then_retry_leaves_exactly_one_destination_job(make_cluster, submit, drive, sim):
    make_cluster("onprem")
    sim.get("onprem").set_faults(accepts_but_times_out=True)
    workload = drive(submit())
    assert workload.state == "dispatching" and workload.destination_job_id == ""
    assert DispatchAttempt.objects.get(workload=workload).state == AttemptState.UNKNOWN
    # the worker that sent it dies; another picks the task up again
    workload = workload_dispatch(workload_id=workload.id)
    assert workload.state == "queued"
    assert len(sim.get("onprem").jobs(workload.uid)) == 1
    assert workload.destination_job_id == sim.get("onprem").jobs(workload.uid)[0].job_id
    assert list(workload.attempts.values_list("state", flat=True)) == ["accepted", "adopted"]


def test_concurrent_retry_while_an_attempt_is_in_flight_does_not_submit_again(make_cluster, submit, sim):
    from broker.services.placing.cycle import workload_place

    make_cluster("onprem")
    workload = workload_place(workload_id=submit().id)
    Workload.objects.filter(id=workload.id).update(state="dispatching")
    DispatchAttempt.objects.create(workload=workload, cluster=workload.cluster, number=1)  # in flight
    workload_dispatch(workload_id=workload.id)
    assert sim.get("onprem").jobs(workload.uid) == []
    assert DispatchAttempt.objects.filter(workload=workload).count() == 1


def test_restart_after_destination_accepted_but_before_reply_adopts_instead_of_resubmitting(
        make_cluster, submit, sim):
    from broker.backends.registry import identity_for
    from broker.backends.simulator import SimulatorBackend
    from broker.services.placing.cycle import workload_place
    from broker.spec import validate_spec

    make_cluster("onprem")
    workload = workload_place(workload_id=submit().id)
    Workload.objects.filter(id=workload.id).update(state="dispatching")
    DispatchAttempt.objects.create(workload=workload, cluster=workload.cluster, number=1)
    SimulatorBackend("onprem").submit(validate_spec(workload.spec), workload.uid, identity_for(workload.project))
    _backdate(workload)  # the broker restarts well after the crash

    _reconcile()
    workload.refresh_from_db()
    assert workload.state == "queued"
    assert len(sim.get("onprem").jobs(workload.uid)) == 1
    assert Reservation.objects.get(workload=workload).state == "confirmed"


def test_restart_before_dispatch_task_ran_dispatches_once_on_reconcile(make_cluster, submit, sim):
    from broker.services.placing.cycle import workload_place

    make_cluster("onprem")
    workload = workload_place(workload_id=submit().id)  # reserved; the dispatch task is lost
    _backdate(workload)
    _reconcile()
    _reconcile()
    workload.refresh_from_db()
    assert workload.state == "queued" and len(sim.get("onprem").jobs(workload.uid)) == 1


# --- invariant 4: every reservation ends ----------------------------------------------------

def test_unacknowledged_reservation_expires_and_workload_is_placed_again(make_cluster, submit, sim):
    from broker.services.placing.cycle import workload_place

    make_cluster("onprem")
    sim.get("onprem").set_faults(unreachable=True)
    workload = workload_place(workload_id=submit().id)
    workload_dispatch(workload_id=workload.id)
    Reservation.objects.filter(workload=workload).update(expires_at=timezone.now() - timedelta(seconds=1))
    sim.get("onprem").clear_faults()
    _backdate(workload)
    reconcile_fleet()
    first = Reservation.objects.filter(workload=workload).order_by("id").first()
    assert first.state == "expired"
    assert sim.get("onprem").jobs(workload.uid) == []
    assert Workload.objects.get(id=workload.id).state == "waiting"


def test_reservation_of_unknown_dispatch_is_kept_while_destination_cannot_tell(make_cluster, submit, drive, sim):
    make_cluster("onprem")
    sim.get("onprem").set_faults(accepts_but_times_out=True)
    workload = drive(submit())
    sim.get("onprem").set_faults(unreachable=True)
    Reservation.objects.filter(workload=workload).update(expires_at=timezone.now() - timedelta(seconds=1))
    _reconcile()
    assert Reservation.objects.get(workload=workload).state == "active"
    sim.get("onprem").clear_faults()
    _backdate(workload)
    _reconcile()
    workload.refresh_from_db()
    assert workload.state == "queued" and Reservation.objects.get(workload=workload).state == "confirmed"
    assert len(sim.get("onprem").jobs(workload.uid)) == 1


# --- invariant 5: stale is not idle ----------------------------------------------------------

def test_stale_cluster_gets_no_placement_and_its_running_jobs_are_not_ended(
        make_cluster, submit, drive, poll, sim):
    onprem = make_cluster("onprem", price="0.5")
    make_cluster("cloud", price="4.0", location="cloud")
    running = drive(submit(name="running"))
    assert running.cluster == onprem
    sim.advance(1)
    poll(onprem)
    sim.get("onprem").set_faults(unreachable=True)
    cluster_sync_inventory(cluster_id=onprem.id)
    assert Cluster.objects.get(id=onprem.id).health == "stale"

    poll(onprem)
    _reconcile()
    running.refresh_from_db()
    assert running.state == "running" and running.ended_at is None
    assert Reservation.objects.get(workload=running).state == "confirmed"

    placed = drive(submit(name="new"))
    assert placed.cluster.name == "cloud"
    assert placed.placement["excluded"]["onprem"]["rule"] == "stale"


def test_cluster_silent_past_the_staleness_limit_is_marked_stale_by_reconcile(make_cluster):
    cluster = make_cluster("onprem")
    Cluster.objects.filter(id=cluster.id).update(last_inventory_at=timezone.now() - timedelta(hours=1))
    report = _reconcile()
    assert "onprem" in report.stale_clusters
    assert Cluster.objects.get(id=cluster.id).health == "stale"


# --- invariant 6: cancellation stored first and retried until confirmed ----------------------

def test_cancellation_is_stored_then_retried_until_the_destination_confirms(make_cluster, submit, drive, sim, trio):
    make_cluster("onprem")
    workload = drive(submit())
    sim.get("onprem").set_faults(unreachable=True)
    workload = workload_cancel(user=trio.member, workload_id=workload.id)
    from broker.services.following.cancel import cancel_propagate

    workload = cancel_propagate(workload_id=workload.id)
    assert workload.state == "cancelling" and workload.cancel_requested_at
    assert Reservation.objects.get(workload=workload).state == "confirmed"
    sim.get("onprem").clear_faults()
    _reconcile()
    workload.refresh_from_db()
    assert workload.state == "cancelled"
    assert Reservation.objects.get(workload=workload).state == "released"
    assert sim.get("onprem").jobs(workload.uid)[0].state.value == "cancelled"


def test_cancel_before_dispatch_ends_at_once_and_nothing_reaches_a_cluster(make_cluster, submit, sim, trio):
    from broker.services.placing.cycle import workload_place

    make_cluster("onprem")
    workload = workload_place(workload_id=submit().id)
    workload = workload_cancel(user=trio.member, workload_id=workload.id)
    assert workload.state == "cancelled"
    workload_dispatch(workload_id=workload.id)
    assert sim.get("onprem").jobs(workload.uid) == []
    assert Reservation.objects.get(workload=workload).state == "released"


# --- unclear allocations go to the escalation queue -------------------------------------------

def test_a_local_users_job_on_a_shared_cluster_is_not_an_orphan(make_cluster, sim):
    make_cluster("onprem", nodes=[8])
    sim.get("onprem").inject_foreign_job(gpus_per_worker=4, account="local-physics")  # sbatch, not the broker
    _reconcile()
    assert not Escalation.objects.filter(kind="orphan_job").exists()


def test_orphan_destination_job_is_escalated_and_its_gpus_stay_busy(make_cluster, submit, drive, sim):
    cluster = make_cluster("onprem", nodes=[8])
    # a job with the broker's marker (a workload id) that the database does not know
    job_id = sim.get("onprem").inject_foreign_job(gpus_per_worker=8, account="unknown", workload_id="wl-lost")
    _reconcile()
    esc = Escalation.objects.get(kind="orphan_job")
    assert esc.destination_job_id == job_id and esc.gpus == 8 and esc.state == "open"
    cluster_sync_inventory(cluster_id=cluster.id)
    workload = drive(submit(gpus_per_worker=8))
    assert workload.state == "waiting" and workload.reason == "capacity"
    _reconcile()
    assert Escalation.objects.filter(kind="orphan_job").count() == 1  # seen again, not duplicated
