"""Fixtures for the fault tests: a small simulated fleet, a tenant with a quota, and the
fault plan installed around the broker's services (see broker/faults/)."""
from __future__ import annotations

from decimal import Decimal

import pytest

from broker.faults import FaultPlan
from broker.faults.install import captured_tasks, failpoint_hooks, faulty_backends


@pytest.fixture
def gpu_class(db):
    from broker.services.fleet.registration import gpu_classes_from_policy

    return {c.slug: c for c in gpu_classes_from_policy()}["a100-80gb"]


@pytest.fixture
def quota(trio, gpu_class):
    from broker.models import Quota

    return Quota.objects.create(tenant=trio.tenant, gpu_class=gpu_class, limit_gpus=16)


@pytest.fixture
def sim_cluster(db):
    """make(name): a simulated Slurm-flavoured cluster of two 8-GPU A100 nodes, registered."""
    from broker.backends.sim import NodeGroup, SimulatorFleet
    from broker.models import Cluster
    from broker.services.fleet.inventory import cluster_sync_inventory

    def make(name: str, price: str = "1.0"):
        SimulatorFleet.instance().add_cluster(name, "slurm", node_groups=[NodeGroup(
            count=2, gpu_model="A100", gpu_memory_gb=80, gpus_per_node=8, name_prefix=f"{name}-")])
        cluster = Cluster.objects.create(name=name, kind="simulator", region="eu-west", location="onprem",
                                         price_per_gpu_hour=Decimal(price), config={"image_pull_s": 0})
        cluster_sync_inventory(cluster_id=cluster.id)
        return cluster
    return make


@pytest.fixture
def plan():
    """A FaultPlan behind every failpoint of the services and every destination call, for the test."""
    fault_plan = FaultPlan()
    with faulty_backends(fault_plan), failpoint_hooks(fault_plan):
        yield fault_plan


@pytest.fixture
def tasks():
    """Tasks the services enqueue, captured instead of run (the test is the worker)."""
    queue: list = []
    with captured_tasks(queue):
        yield queue


@pytest.fixture
def submit(trio, quota):
    from broker.services.submitting.workloads import workload_submit

    def _submit(name: str = "train", gpus: int = 2, workers: int = 1, **spec):
        return workload_submit(user=trio.member, project_id=trio.project.id, spec_data={
            "name": name, "command": "python train.py", "gpu_class": "a100-80gb", "gpus_per_worker": gpus,
            "workers": workers, **spec})
    return _submit


def crashes(fn, *args, **kwargs) -> bool:
    """Run fn; True when it died of an injected Crash."""
    from broker.faults import Crash

    try:
        fn(*args, **kwargs)
    except Crash:
        return True
    return False



@pytest.fixture
def sim():
    from broker.backends.sim import SimulatorFleet

    return SimulatorFleet.instance()
