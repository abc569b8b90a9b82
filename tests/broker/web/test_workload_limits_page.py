"""The workload page explains local-limit exclusions and a withdrawal with the numbers."""
from __future__ import annotations

from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from broker.backends.sim import Partition
from broker.services.placing.withdraw import policy_holds_withdraw


def test_rejected_gang_page_names_the_local_rule_and_numbers(trio, make_cluster, submit, drive, login):
    make_cluster("onprem-slurm", nodes=[8, 8, 8, 8], partitions=[Partition("gpu", 16, True)])
    workload = drive(submit(gpus_per_worker=8, workers=4))
    page = login(trio.member).get(reverse("workload-detail", args=[workload.id])).content.decode()
    assert "Rejected" in page and "its own admission would never take it" in page
    assert "caps a job at 16 GPUs; this job needs 32" in page
    assert login(trio.outsider).get(reverse("workload-detail", args=[workload.id])).status_code == 404


def test_rejected_gang_page_says_the_broker_rejected_it_not_that_a_cluster_holds_it(trio, make_cluster, submit,
                                                                                   drive, login):
    make_cluster("onprem-slurm", nodes=[8, 8, 8, 8], partitions=[Partition("gpu", 16, True)])
    workload = drive(submit(gpus_per_worker=8, workers=4))
    page = login(trio.member).get(reverse("workload-detail", args=[workload.id])).content.decode()
    assert "Rejected by the broker: no cluster could run the whole job, even when idle" in page
    assert "Broker says: onprem-slurm:" in page and "Not placed: no cluster could ever run it." in page
    assert "Held by a policy limit at the cluster" not in page and "Scheduler says" not in page
    api = login(trio.member).get(f"/api/v1/workloads/{workload.id}/").json()
    assert api["local_reason_text"].startswith("Rejected by the broker")
    assert login(trio.outsider).get(f"/api/v1/workloads/{workload.id}/").status_code == 404


def test_withdrawn_workload_page_says_where_it_was_held_and_for_how_long(trio, make_cluster, submit, drive,
                                                                        sim, poll, login):
    held = make_cluster("held", flavor="kueue", nodes=[8, 8], price="1.0", quotas={"a100-80gb": 24})
    make_cluster("other", nodes=[8, 8], price="3.0")
    sim.get("held").set_quota("a100-80gb", 4)
    workload = drive(submit(gpus_per_worker=8))
    poll(held)
    policy_holds_withdraw(now=timezone.now() + timedelta(hours=1))
    page = login(trio.member).get(reverse("workload-detail", args=[workload.id])).content.decode()
    assert "withdrawn after 60 min held by local policy at held" in page
    assert login(trio.outsider).get(reverse("workload-detail", args=[workload.id])).status_code == 404
