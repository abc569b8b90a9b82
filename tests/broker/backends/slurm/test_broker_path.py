"""The broker's own services against the real Slurm cluster: identity, inventory,
placement, dispatch, status and cancellation, end to end."""
from __future__ import annotations

import subprocess
import time
import uuid

import pytest

from broker.models import Cluster, Quota, Workload
from broker.services.following.cancel import cancel_propagate
from broker.services.fleet.registration import gpu_classes_from_policy
from broker.services.fleet.identity import slurm_accounts_ensure
from broker.services.fleet.inventory import cluster_sync_inventory
from broker.services.following.status import cluster_poll_status
from broker.services.submitting.workloads import workload_cancel, workload_submit
from tests.factories import MembershipFactory, ProjectFactory, TenantFactory, UserFactory

from .support import JOBDIR

pytestmark = pytest.mark.slurm


@pytest.fixture
def real_slurm(db, settings, slurm_env):
    settings.GPUBROKER_ENABLE_SLURM = True
    settings.GPUBROKER_ENABLE_SIMULATOR = False
    return Cluster.objects.create(
        name="ci-slurm", kind="slurm", region="eu-west", location="onprem",
        config={"transport": "cli", "partition": "gpu", "submit_user": "root", "image_pull_s": 0,
                "workdir": str(JOBDIR)})


@pytest.fixture
def researcher_project(db):
    tenant = TenantFactory(slug="physics")
    account = "bk" + uuid.uuid4().hex[:8]  # a fresh Slurm account each run
    project = ProjectFactory(tenant=tenant, slug="lattice", slurm_account=account)
    user = UserFactory(username="r1")
    MembershipFactory(user=user, tenant=tenant, role="researcher")
    classes = {c.slug: c for c in gpu_classes_from_policy()}
    Quota.objects.create(tenant=tenant, gpu_class=classes["a100-80gb"], limit_gpus=32)
    return project, user


def _wait(predicate, timeout_s: float = 60) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(1)
    return False


def test_broker_places_dispatches_follows_and_cancels_on_real_slurm(real_slurm, researcher_project):
    project, user = researcher_project
    checks = slurm_accounts_ensure(create=True)
    assert [c for c in checks if c.account == project.slurm_account][0].created

    cluster = cluster_sync_inventory(cluster_id=real_slurm.id)
    assert cluster.health == "healthy" and cluster.pools.exists()

    workload = workload_submit(user=user, project_id=project.id, spec_data={
        "name": "real-slurm", "command": "sleep 120", "gpu_models": ["A100"], "gpu_class": "a100-80gb",
        "gpus_per_worker": 1, "workers": 2, "cpus_per_worker": 1, "memory_gb_per_worker": 1,
        "time_limit_minutes": 5})
    from broker.services.dispatching.send import workload_dispatch
    from broker.services.placing.cycle import workload_place

    workload = workload_place(workload_id=workload.id)
    assert workload.state == "reserved", workload.raw_reason
    workload = workload_dispatch(workload_id=workload.id)
    workload.refresh_from_db()
    assert workload.state == "queued" and workload.destination_job_id
    squeue = subprocess.run(["squeue", "-h", "-j", workload.destination_job_id, "-o", "%j %a"],
                            capture_output=True, text=True, timeout=30).stdout.split()
    assert squeue == [workload.uid, project.slurm_account]

    def running() -> bool:
        cluster_poll_status(cluster_id=real_slurm.id)
        return Workload.objects.get(id=workload.id).state == "running"

    assert _wait(running), Workload.objects.get(id=workload.id).raw_reason
    workload_cancel(user=user, workload_id=workload.id)

    def cancelled() -> bool:
        cancel_propagate(workload_id=workload.id)
        return Workload.objects.get(id=workload.id).state == "cancelled"

    assert _wait(cancelled, 30)
    assert Workload.objects.get(id=workload.id).reservations.get().state == "released"


def test_stopped_slurmctld_makes_the_cluster_stale_and_running_jobs_carry_on(
        real_slurm, researcher_project, settings):
    from pathlib import Path

    from broker.services.dispatching.send import workload_dispatch
    from broker.services.placing.cycle import workload_place
    from broker.services.following.reconcile import reconcile_fleet

    script = Path(__file__).resolve().parents[4] / "scripts" / "slurm-cluster"
    project, user = researcher_project
    slurm_accounts_ensure(create=True)
    cluster_sync_inventory(cluster_id=real_slurm.id)
    workload = workload_submit(user=user, project_id=project.id, spec_data={
        "name": "outage", "command": "sleep 300", "gpu_class": "a100-80gb", "gpus_per_worker": 1,
        "cpus_per_worker": 1, "memory_gb_per_worker": 1, "time_limit_minutes": 10})
    workload_dispatch(workload_id=workload_place(workload_id=workload.id).id)

    def running() -> bool:
        cluster_poll_status(cluster_id=real_slurm.id)
        return Workload.objects.get(id=workload.id).state == "running"

    assert _wait(running), Workload.objects.filter(id=workload.id).values_list("state", "reason", "raw_reason")[0]
    settings.GPUBROKER_BACKEND_TIMEOUT_S = 3  # a silent controller answers nothing for ~9 s
    subprocess.run([str(script), "down", "slurmctld"], check=True, timeout=60)
    try:
        assert cluster_sync_inventory(cluster_id=real_slurm.id).health == "stale"
        cluster_poll_status(cluster_id=real_slurm.id)
        reconcile_fleet()
        held = Workload.objects.get(id=workload.id)
        assert held.state == "running" and held.ended_at is None  # stale is not idle, nor ended
        assert held.reservations.get().state == "confirmed"
    finally:
        subprocess.run([str(script), "up"], check=True, timeout=180)
    settings.GPUBROKER_BACKEND_TIMEOUT_S = 20
    assert cluster_sync_inventory(cluster_id=real_slurm.id).health == "healthy"
    cluster_poll_status(cluster_id=real_slurm.id)
    assert Workload.objects.get(id=workload.id).state == "running"
    workload_cancel(user=user, workload_id=workload.id)
    assert _wait(lambda: cancel_propagate(workload_id=workload.id).state == "cancelled", 30)
