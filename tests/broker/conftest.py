"""Fixtures for broker tests: simulated clusters registered as Cluster rows."""
from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from broker.backends.sim import NodeGroup, SimulatorFleet
from broker.models import Cluster, GpuClass, Quota
from broker.services.fleet.registration import gpu_classes_from_policy
from broker.services.fleet.inventory import cluster_sync_inventory
from broker.services.placing.cycle import workload_place
from broker.services.dispatching.send import workload_dispatch
from broker.services.following.status import cluster_poll_status
from broker.services.submitting.workloads import workload_submit


@pytest.fixture
def gpu_classes(db) -> dict[str, GpuClass]:
    return {c.slug: c for c in gpu_classes_from_policy()}


@pytest.fixture
def quota(trio, gpu_classes) -> Quota:
    return Quota.objects.create(tenant=trio.tenant, gpu_class=gpu_classes["a100-80gb"], limit_gpus=64)


@pytest.fixture
def owned_quota(trio, quota) -> Quota:
    """The tenant's a100-80gb quota with the tenant admin as its owner."""
    quota.owner = trio.owner
    quota.save()
    return quota


@pytest.fixture
def quota_request_body(trio) -> dict:
    """A valid request for 8 more a100-80gb GPUs for a week, as a form or API body."""
    return {"project": trio.project.id, "gpu_class": "a100-80gb", "extra_gpus": 8, "reason": "paper deadline",
            "ends_on": (timezone.now().date() + timedelta(days=7)).isoformat()}


@pytest.fixture
def quota_request(trio, quota):
    """A pending request by the researcher for 4 more GPUs of the quota's class."""
    from broker.services.quota.requests import quota_request_create

    return quota_request_create(user=trio.member, project_id=trio.project.id, gpu_class=quota.gpu_class.slug,
                                extra_gpus=4, reason="a bigger run", ends_on=timezone.now().date() + timedelta(days=3))


@pytest.fixture
def sim():
    return SimulatorFleet.instance()


@pytest.fixture
def make_cluster(db, sim):
    def _make(name: str, *, flavor: str = "slurm", nodes: list[int] = (8, 8), gpu_model: str = "A100",
              memory_gb: int = 80, location: str = "onprem", price: str = "1.2", region: str = "eu-west",
              partitioning: str = "whole", domain: str = "", **options) -> Cluster:
        groups = [NodeGroup(count=1, gpu_model=gpu_model, gpu_memory_gb=memory_gb, gpus_per_node=n,
                            partitioning=partitioning, interconnect_domain=domain,
                            name_prefix=f"{name}-n{i}-") for i, n in enumerate(nodes)]
        sim.add_cluster(name, flavor, node_groups=groups, **options)
        cluster = Cluster.objects.create(name=name, kind="simulator", region=region, location=location,
                                         price_per_gpu_hour=Decimal(price),
                                         config={"image_pull_s": 0, "flavor": flavor})
        cluster_sync_inventory(cluster_id=cluster.id)
        cluster.refresh_from_db()
        return cluster
    return _make


@pytest.fixture
def submit(trio, quota):
    def _submit(*, gpus_per_worker: int = 2, workers: int = 1, user=None, project=None, **spec):
        data = {"name": spec.pop("name", "train"), "command": "python train.py", "gpu_class": "a100-80gb",
                "gpus_per_worker": gpus_per_worker, "workers": workers, **spec}
        return workload_submit(user=user or trio.member, project_id=(project or trio.project).id, spec_data=data)
    return _submit


@pytest.fixture
def drive():
    """Run placement and dispatch the way the tasks would, without a queue in between."""
    def _drive(workload):
        workload = workload_place(workload_id=workload.id)
        for _ in range(5):  # a local rejection re-places the workload on the next cluster
            if workload.state != "reserved":
                break
            workload = workload_dispatch(workload_id=workload.id)
            workload.refresh_from_db()
        return workload
    return _drive


@pytest.fixture
def poll():
    def _poll(*clusters: Cluster) -> None:
        for cluster in clusters:
            cluster_poll_status(cluster_id=cluster.id)
    return _poll
