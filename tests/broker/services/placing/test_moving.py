"""A job waiting in one destination's queue moves when another could start it now: cancelled
there first (confirmed), then its reservation released and the job placed again."""
from __future__ import annotations

from datetime import timedelta

import pytest

from django.utils import timezone

from broker.backends.base import JobState
from broker.models import AuditRecord, Cluster, Reservation, Workload
from broker.services.fleet.inventory import cluster_sync_inventory
from broker.services.fleet.policy import current_policy, policy_override
from broker.services.following.status import cluster_poll_status
from broker.services.placing.moving import queued_moves


def _queued_at_busy(make_cluster, submit, drive, sim, *, other_queueing=False):
    """The job waits in the queue of 'busy' (both clusters full, 'busy' cheaper); then a
    node of 'other' frees.  With ``other_queueing``, 'other' has a second node busy for
    hours and a local gang that needs both waits in its queue: 'other' has a job queued
    and room for ours."""
    busy = make_cluster("busy", nodes=[8, 8], price="1.0")
    other = make_cluster("other", nodes=[8, 8] if other_queueing else [8], price="3.0")
    busy_for_s = 36000 if other_queueing else 3600
    for _ in range(2):
        sim.get("busy").inject_foreign_job(gpus_per_worker=8, account="locals", duration_s=busy_for_s)
    sim.get("other").inject_foreign_job(gpus_per_worker=8, account="locals", duration_s=1800)
    if other_queueing:
        sim.get("other").inject_foreign_job(gpus_per_worker=8, account="locals", duration_s=36000)
    sim.advance(60)
    cluster_sync_inventory(cluster_id=busy.id)
    cluster_sync_inventory(cluster_id=other.id)
    workload = submit(gpus_per_worker=4)
    Workload.objects.filter(id=workload.id).update(created_at=timezone.now() - timedelta(minutes=5))
    workload = drive(Workload.objects.get(id=workload.id))
    assert workload.state == "queued" and workload.cluster == busy
    if other_queueing:
        sim.get("other").inject_foreign_job(name="gang", gpus_per_worker=8, workers=2, account="locals")
    sim.advance(1800)  # the first local job on 'other' ends; 'busy' stays full
    if other_queueing:
        _report(busy, other)
    return busy, other, workload


def _report(*clusters):
    """Each cluster's inventory report and status poll (which says why the job waits)."""
    for cluster in clusters:
        cluster_sync_inventory(cluster_id=cluster.id)
        cluster_poll_status(cluster_id=cluster.id)


def test_a_queued_job_moves_to_a_cluster_that_could_start_it_now(make_cluster, submit, drive, sim):
    busy, other, workload = _queued_at_busy(make_cluster, submit, drive, sim)
    old_job = workload.destination_job_id
    _report(busy, other)
    assert queued_moves(now=timezone.now() + timedelta(minutes=1)) == 1
    workload = drive(Workload.objects.get(id=workload.id))
    assert workload.cluster == other and workload.state in ("queued", "running")
    assert sim.get("busy").job(old_job).state == JobState.CANCELLED
    assert workload.tried_clusters == []  # 'busy' was only slower: it stays eligible
    states = list(Reservation.objects.filter(workload=workload).order_by("id").values_list("state", "cluster__name"))
    assert states == [("released", "busy"), ("confirmed", "other")]
    moved = AuditRecord.objects.get(workload=workload, action="workload.moved")
    assert moved.cluster == "busy" and "while other could start it now" in moved.message


def test_a_gang_its_destination_holds_for_the_whole_gang_moves_too(make_cluster, submit, drive, sim):
    busy, other, workload = _queued_at_busy(make_cluster, submit, drive, sim)
    _report(busy, other)
    # as Volcano reports a gang whose pods are not all schedulable: waiting for the whole gang
    Workload.objects.filter(id=workload.id).update(reason="gang", raw_reason="1/2 tasks in gang unschedulable")
    assert queued_moves(now=timezone.now() + timedelta(minutes=1)) == 1
    assert Workload.objects.get(id=workload.id).cluster == other


def test_no_move_before_its_destination_has_reported_since_the_job_was_sent(make_cluster, submit, drive, sim):
    busy, other, workload = _queued_at_busy(make_cluster, submit, drive, sim)
    cluster_poll_status(cluster_id=busy.id)  # it waits there for resources...
    _report(other)  # ...and 'other' shows room, but 'busy' has sent no report since the job arrived:
    Cluster.objects.filter(id=busy.id).update(last_inventory_at=workload.dispatched_at - timedelta(seconds=1))
    assert queued_moves(now=timezone.now() + timedelta(minutes=1)) == 0
    assert Workload.objects.get(id=workload.id).cluster == busy


def test_no_move_while_no_other_cluster_could_start_it(make_cluster, submit, drive, sim):
    busy, other, workload = _queued_at_busy(make_cluster, submit, drive, sim)
    sim.get("other").inject_foreign_job(gpus_per_worker=8, account="locals", duration_s=36000)
    _report(busy, other)
    assert queued_moves(now=timezone.now() + timedelta(minutes=1)) == 0
    assert Workload.objects.get(id=workload.id).state == "queued"


def test_a_move_waits_for_the_cancel_to_be_confirmed(make_cluster, submit, drive, sim):
    busy, other, workload = _queued_at_busy(make_cluster, submit, drive, sim)
    _report(busy, other)
    sim.get("busy").set_faults(unreachable=True)
    assert queued_moves(now=timezone.now() + timedelta(minutes=1)) == 0
    workload.refresh_from_db()
    assert workload.state == "queued" and workload.cluster == busy
    assert Reservation.objects.get(workload=workload).state == "confirmed"
    assert AuditRecord.objects.filter(workload=workload, action="move.retrying").exists()


@pytest.mark.parametrize("waited_min, moves", [(5, 0), (31, 1)])
def test_a_job_long_in_its_queue_also_moves_to_a_cluster_with_jobs_queued(
    make_cluster, submit, drive, sim, waited_min, moves
):
    busy, other, workload = _queued_at_busy(make_cluster, submit, drive, sim, other_queueing=True)
    now = workload.dispatched_at + timedelta(minutes=waited_min)
    text = current_policy().text.replace("move_past_queue_after_s: null", "move_past_queue_after_s: 1800")
    with policy_override(text):
        assert queued_moves(now=now) == moves
    assert Workload.objects.get(id=workload.id).cluster == (other if moves else busy)


def test_without_the_rule_a_job_never_moves_to_a_cluster_with_jobs_queued(make_cluster, submit, drive, sim):
    busy, other, workload = _queued_at_busy(make_cluster, submit, drive, sim, other_queueing=True)
    assert current_policy().policy.aging.move_past_queue_after_s is None  # the shipped policy file
    assert queued_moves(now=workload.dispatched_at + timedelta(days=1)) == 0
    assert Workload.objects.get(id=workload.id).cluster == busy


@pytest.mark.parametrize("max_moves, moves", [(2, 0), (3, 1)])
def test_a_job_that_has_moved_the_policys_max_moves_times_stays_where_it_waits(
    make_cluster, submit, drive, sim, max_moves, moves
):
    busy, other, workload = _queued_at_busy(make_cluster, submit, drive, sim)
    for _ in range(2):  # its trail: moved twice before it came to wait at 'busy'
        AuditRecord.objects.create(workload=workload, tenant=workload.tenant, action="workload.moved", cluster="x")
    _report(busy, other)
    text = current_policy().text.replace("max_moves: 2 ", f"max_moves: {max_moves} ")
    with policy_override(text):
        assert current_policy().policy.aging.max_moves == max_moves
        assert queued_moves(now=timezone.now() + timedelta(minutes=1)) == moves
    assert Workload.objects.get(id=workload.id).cluster == (other if moves else busy)
