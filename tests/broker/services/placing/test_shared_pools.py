"""On the simulated fleet, through the broker's own placement pass: a job asking for whole GPUs
never lands on a pool of time-sliced replicas, however many it advertises free."""
from __future__ import annotations

import pytest

from accounting.chargeback import build_report
from accounting.models import UsageEntry
from accounting.services.reconciliation import broker_seconds
from accounting.services.usage import usage_collect
from broker import runtime
from broker.models import Workload
from broker.outcomes import workload_outcome
from broker.spec import SpecError
from broker.services.placing.cycle import waiting_place_pass


def test_a_whole_gpu_job_goes_to_whole_gpus_not_to_cheaper_time_sliced_replicas(trio, quota, make_cluster, submit):
    # 8 GPUs x 4 replicas, idle and cheaper: were its replicas whole GPUs, it would win
    make_cluster("shared-k8s", nodes=[8], partitioning="time-slicing", price="0.5")
    make_cluster("onprem", nodes=[8], price="1.2")
    job = submit(gpus_per_worker=4)
    waiting_place_pass()
    job = Workload.objects.get(id=job.id)
    assert job.state == "reserved" and job.cluster.name == "onprem"
    excluded = job.placement["excluded"]
    assert excluded["shared-k8s"]["rule"] == "partitioning"
    assert "offers time-slicing GPUs, the job needs whole" in excluded["shared-k8s"]["message"]


def test_a_job_of_gpu_shares_runs_on_the_shared_pool_and_is_charged_its_share(make_cluster, submit, drive, sim, poll):
    # 8 GPUs time-sliced into 4 replicas each; whole GPUs elsewhere, which a share never takes
    shared = make_cluster("shared-k8s", flavor="kueue", nodes=[8], partitioning="time-slicing", price="2.0")
    make_cluster("onprem", nodes=[8], price="1.2")
    workload = submit(gpus_per_worker=2, gpu_share=True)
    sim.set_duration(workload.uid, 600)
    workload = drive(workload)
    assert workload.placed_cluster == shared, workload.raw_reason
    excluded = workload.placement["excluded"]["onprem"]
    assert excluded["rule"] == "partitioning" and "the job asks for GPU shares" in excluded["message"]
    assert workload.placement["chosen"]["units_per_gpu"] == 4
    poll(shared)
    sim.advance(600)
    poll(shared)
    workload.refresh_from_db()
    assert workload.state == "completed"

    usage_collect(cluster_id=shared.id)
    entry = UsageEntry.objects.get(cluster=shared)
    assert entry.gpus == 2 and entry.gpu_seconds == 2 * 600 // 4  # two quarters of a GPU, not two GPUs
    assert workload_outcome(workload)["gpu_hours"] == round(300 / 3600, 4)
    assert broker_seconds(workload) == entry.gpu_seconds  # reconciliation finds the two agree
    month = runtime.now().date().replace(day=1)
    report = build_report(months=[month], tenant_ids={workload.tenant_id})
    assert sum(r.onprem_seconds + r.cloud_seconds for r in report.rows) == 300  # the chargeback's figure


def test_a_share_and_a_mig_slice_cannot_be_asked_at_once(submit):
    with pytest.raises(SpecError) as caught:
        submit(gpus_per_worker=1, gpu_share=True, mig_profile="1g.10gb")
    assert "gpu_share" in caught.value.errors


def test_a_worker_asking_more_shares_than_one_gpu_holds_is_refused_with_the_numbers(trio, quota, make_cluster, submit):
    make_cluster("shared-k8s", flavor="kueue", nodes=[8], partitioning="time-slicing")  # 4 shares a GPU
    job = submit(gpus_per_worker=6, gpu_share=True)
    waiting_place_pass()
    job = Workload.objects.get(id=job.id)
    assert job.state == "rejected"  # no pool can ever hold it: told now, not left waiting
    message = job.placement["excluded"]["shared-k8s"]["message"]
    assert "splits a GPU into 4 shares; a worker asks 6, more than one GPU holds" in message


def test_the_job_page_says_its_gpus_are_shares_charged_as_their_part(make_cluster, submit, drive, login, trio):
    from django.urls import reverse  # noqa: PLC0415

    make_cluster("shared-k8s", flavor="kueue", nodes=[8], partitioning="time-slicing")
    workload = drive(submit(gpus_per_worker=2, gpu_share=True))
    body = login(trio.member).get(reverse("workload-detail", args=[workload.id])).content.decode()
    assert "2 a100-80gb GPU shares (1 × 2)" in body and "charged as their part of a GPU" in body
    assert login(trio.outsider).get(reverse("workload-detail", args=[workload.id])).status_code == 404
