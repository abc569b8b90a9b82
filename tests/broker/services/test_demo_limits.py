"""The demo fleet (broker/fleets/demo.yaml, seeded as `make demo` seeds it) explains the
4 x 8 a100-80gb gang: Slurm's QoS caps a job at 16 GPUs, the cloud ClusterQueue admits
24, so it is rejected with both rules; a 3 x 8 gang goes to the cloud."""
from __future__ import annotations

import pytest

from broker.backends.sim import SimulatorFleet
from broker.fleet_file import build_simulated_clusters, load_demo_fleet
from broker.models import Cluster
from demo.seed import demo_seed
from broker.services.dispatching.send import workload_dispatch
from broker.services.fleet.inventory import cluster_sync_inventory
from broker.services.placing.cycle import workload_place
from broker.services.submitting.workloads import workload_submit
from portal.tenancy.models import Project


@pytest.fixture
def demo(db):
    SimulatorFleet.reset()
    build_simulated_clusters(load_demo_fleet())
    demo_seed()
    for cluster in Cluster.objects.all():
        cluster_sync_inventory(cluster_id=cluster.id)
    yield
    SimulatorFleet.reset()


def _submit(gpus_per_worker: int, workers: int, **spec):
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.get(username="researcher")
    project = Project.objects.get(slug="lattice-qcd")
    workload = workload_submit(user=user, project_id=project.id, spec_data={
        "name": "gang", "command": "python train.py", "gpu_class": "a100-80gb",
        "gpus_per_worker": gpus_per_worker, "workers": workers, **spec})
    workload = workload_place(workload_id=workload.id)
    if workload.state == "reserved":
        workload = workload_dispatch(workload_id=workload.id)
    workload.refresh_from_db()
    return workload


def test_demo_four_by_eight_gang_is_rejected_with_the_qos_cap_and_the_clusterqueue_quota(demo):
    workload = _submit(8, 4)
    assert workload.state == "rejected"
    excluded = workload.placement["excluded"]
    assert excluded["onprem-slurm"]["rule"] == "local_limit"
    assert "caps a job at 16 GPUs; this job needs 32" in excluded["onprem-slurm"]["message"]
    assert excluded["cloud-k8s"]["rule"] == "local_limit"
    assert "admits at most 24 GPUs; this job needs 32" in excluded["cloud-k8s"]["message"]
    assert excluded["onprem-k8s"]["rule"] == "gpu_memory"


def test_demo_three_by_eight_gang_is_sent_to_the_cloud_where_its_quota_admits_it(demo):
    workload = _submit(8, 3)
    assert workload.state == "queued" and workload.cluster.name == "cloud-k8s"


def test_demo_pulling_a_terabyte_from_the_cloud_store_on_prem_costs_its_egress(demo):
    workload = _submit(8, 1, data_location="s3-eu-central", data_size_gb=1000)
    onprem = next(c for c in workload.placement["ranked"] if c["cluster"] == "onprem-slurm")
    assert onprem["breakdown"]["transfer_cost"] == pytest.approx(90.0)
    assert onprem["detail"]["data_from"] == "cloud-k8s"
