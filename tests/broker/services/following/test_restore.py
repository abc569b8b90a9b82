"""after_restore: a workload the restored database holds as placed, whose job its cluster got
after the backup, is looked up and adopted instead of being sent a second time."""
from __future__ import annotations

from datetime import timedelta

from django.core.management import call_command
from django.test import TestCase
from django.utils import timezone

from broker.models import DispatchAttempt, Workload
from broker.services.following.reconcile import reconcile_fleet
from broker.services.following.restore import workloads_mark_restored


def _sent_behind_the_databases_back(workload: Workload) -> None:
    """What a dispatch after the backup left at the cluster (its rows lost with the restore)."""
    from broker.backends.registry import identity_for
    from broker.backends.simulator import SimulatorBackend
    from broker.spec import validate_spec

    SimulatorBackend(workload.cluster.name).submit(validate_spec(workload.spec), workload.uid,
                                                   identity_for(workload.project))


def _restarted_later(workload: Workload) -> None:
    past = timezone.now() - timedelta(seconds=600)
    Workload.objects.filter(id=workload.id).update(updated_at=past)
    DispatchAttempt.objects.filter(workload=workload).update(created_at=past)


def test_placed_workload_whose_job_the_cluster_has_is_adopted_not_sent_again(make_cluster, submit, sim):
    from broker.services.placing.cycle import workload_place

    make_cluster("onprem")
    workload = workload_place(workload_id=submit().id)
    _sent_behind_the_databases_back(workload)

    assert workloads_mark_restored().marked == [workload.uid]
    _restarted_later(workload)
    with TestCase.captureOnCommitCallbacks(execute=True):
        reconcile_fleet()
    workload.refresh_from_db()
    assert workload.state == "queued"
    assert [j.job_id for j in sim.get("onprem").jobs(workload.uid)] == [workload.destination_job_id]
    # the unknown attempt is the one that created the job (as after a lost reply): accepted
    assert list(workload.attempts.order_by("number").values_list("state", flat=True)) == ["accepted", "adopted"]


def test_placed_workload_its_cluster_does_not_have_is_sent_once(make_cluster, submit, sim):
    from broker.services.placing.cycle import workload_place

    make_cluster("onprem")
    workload = workload_place(workload_id=submit().id)
    workloads_mark_restored()
    _restarted_later(workload)
    with TestCase.captureOnCommitCallbacks(execute=True):
        reconcile_fleet()
    workload.refresh_from_db()
    assert workload.state == "queued" and len(sim.get("onprem").jobs(workload.uid)) == 1


def test_after_restore_names_the_workloads_it_marked_and_leaves_dispatched_ones_alone(make_cluster, submit, drive):
    from io import StringIO

    from broker.services.placing.cycle import workload_place

    make_cluster("onprem")
    dispatched = drive(submit(name="sent"))
    placed = workload_place(workload_id=submit(name="placed").id)
    out = StringIO()
    call_command("after_restore", stdout=out)
    assert out.getvalue().splitlines() == [
        "1 workload(s) on their way to a cluster: looked up before any send", f"  {placed.uid}"]
    assert DispatchAttempt.objects.filter(workload=dispatched).count() == 1
    assert Workload.objects.get(id=placed.id).state == "dispatching"
