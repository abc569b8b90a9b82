"""The workload page says when a job was sent to wait in a cluster's queue, and when it moved."""
from __future__ import annotations

from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from broker.models import Workload
from broker.services.fleet.inventory import cluster_sync_inventory


def test_a_job_sent_to_wait_in_a_queue_says_so_with_the_work_ahead(trio, make_cluster, submit, drive, sim, login):
    busy = make_cluster("busy", nodes=[8, 8])
    for _ in range(2):
        sim.get("busy").inject_foreign_job(gpus_per_worker=8, account="locals", duration_s=36000)
    sim.advance(60)
    cluster_sync_inventory(cluster_id=busy.id)
    workload = submit(gpus_per_worker=4)
    Workload.objects.filter(id=workload.id).update(created_at=timezone.now() - timedelta(minutes=3))
    workload = drive(Workload.objects.get(id=workload.id))
    page = login(trio.member).get(reverse("workload-detail", args=[workload.id])).content.decode()
    assert "sent to wait in its queue, as nothing fit now (about 900 s of work ahead)" in page
    assert login(trio.outsider).get(reverse("workload-detail", args=[workload.id])).status_code == 404
