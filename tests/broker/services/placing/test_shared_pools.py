"""On the simulated fleet, through the broker's own placement pass: a job asking for whole GPUs
never lands on a pool of time-sliced replicas, however many it advertises free."""
from __future__ import annotations

from broker.models import Workload
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
