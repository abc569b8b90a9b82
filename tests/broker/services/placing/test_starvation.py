"""Starvation guard: a big gang that has waited long gets a pool drained for it."""
from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from broker.models import AuditRecord, GpuPool, Workload
from broker.services.fleet.inventory import cluster_sync_inventory
from broker.services.fleet.policy import current_policy, policy_override
from broker.services.placing.cycle import workload_place


def _holds_only():
    """The policy in force with jobs kept at the broker (no queueing at a destination): the
    hold is then what serves a big gang."""
    return policy_override(current_policy().text.replace("queue_after_s: 120", "queue_after_s: null"))


def test_long_waiting_big_gang_holds_a_pool_against_a_stream_of_small_jobs(make_cluster, submit, drive, sim):
    with _holds_only():
        _gang_holds_a_pool(make_cluster, submit, drive, sim)


def _gang_holds_a_pool(make_cluster, submit, drive, sim):
    cluster = make_cluster("onprem", nodes=[8, 8])
    sim.get("onprem").inject_foreign_job(gpus_per_worker=4, account="other", duration_s=600)
    cluster_sync_inventory(cluster_id=cluster.id)

    gang = submit(name="gang", gpus_per_worker=8, workers=2)
    Workload.objects.filter(id=gang.id).update(created_at=timezone.now() - timedelta(hours=2))
    gang = workload_place(workload_id=gang.id)
    assert gang.state == "waiting" and gang.reason == "capacity"
    assert GpuPool.objects.get(cluster=cluster).held_for == gang.uid
    assert AuditRecord.objects.filter(workload=gang, action="placement.hold").exists()

    small = drive(submit(name="small", gpus_per_worker=2))
    assert small.state == "waiting"  # would fit on the idle node, but that node drains for the gang

    sim.advance(700)  # the foreign job ends
    cluster_sync_inventory(cluster_id=cluster.id)
    gang = drive(gang)
    assert gang.state == "queued" and GpuPool.objects.get(cluster=cluster).held_for == ""


def test_young_or_small_jobs_never_hold_pools(make_cluster, submit, drive, sim):
    cluster = make_cluster("onprem", nodes=[8, 8])
    sim.get("onprem").inject_foreign_job(gpus_per_worker=4, account="other")
    cluster_sync_inventory(cluster_id=cluster.id)
    gang = drive(submit(name="gang", gpus_per_worker=8, workers=2))
    assert gang.state == "waiting"
    assert GpuPool.objects.get(cluster=cluster).held_for == ""
