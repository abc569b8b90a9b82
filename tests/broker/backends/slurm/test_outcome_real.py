"""How a job ended and what it printed, on the real Slurm cluster, through both transports:
exit code 3 with its last lines on the workload page, and a time-limit kill in plain words."""
from __future__ import annotations

import time
import uuid

import pytest

from broker.models import Cluster, Quota, Workload
from portal.tenancy.models import Project
from broker.services.dispatching.send import workload_dispatch
from broker.services.fleet.registration import gpu_classes_from_policy
from broker.services.fleet.identity import slurm_accounts_ensure
from broker.services.fleet.inventory import cluster_sync_inventory
from broker.services.placing.cycle import workload_place
from broker.services.following.status import cluster_poll_status
from broker.services.submitting.workloads import workload_submit
from tests.factories import MembershipFactory, ProjectFactory, TenantFactory, UserFactory

from .support import JOBDIR

pytestmark = pytest.mark.slurm


@pytest.fixture
def researcher(db):
    tenant = TenantFactory(slug="physics")
    project = ProjectFactory(tenant=tenant, slug="lattice", slurm_account="bk" + uuid.uuid4().hex[:8])
    user = UserFactory(username="r1")
    MembershipFactory(user=user, tenant=tenant, role="researcher")
    classes = {c.slug: c for c in gpu_classes_from_policy()}
    Quota.objects.create(tenant=tenant, gpu_class=classes["a100-80gb"], limit_gpus=32)
    return project, user


def _cluster(settings, monkeypatch, slurm_env, transport: str) -> Cluster:
    settings.GPUBROKER_ENABLE_SLURM = True
    settings.GPUBROKER_ENABLE_SIMULATOR = False
    config = {"transport": "cli", "partition": "gpu", "submit_user": "root", "image_pull_s": 0,
              "output_dir": str(JOBDIR / "out")}
    credentials = ""
    if transport == "rest":
        monkeypatch.setenv("SLURM_JWT", slurm_env["SLURM_JWT"])
        config.update(transport="rest", rest_url=slurm_env["SLURMRESTD_URL"], user_name="root",
                      workdir=str(JOBDIR), logs_prefix=[])  # the jobs run on this host
        credentials = "env:SLURM_JWT"
        # slurmrestd cannot create accounts: the cluster's own account stands in
        Project.objects.update(slurm_account=slurm_env.get("SLURM_CI_ACCOUNT", "general"))
    return Cluster.objects.create(name=f"ci-{transport}", kind="slurm", region="eu-west", location="onprem",
                                  config=config, credentials_ref=credentials)


def _run_to_end(cluster: Cluster, project, user, command: str, minutes: int, timeout_s: float) -> Workload:
    slurm_accounts_ensure(create=True)
    cluster_sync_inventory(cluster_id=cluster.id)
    workload = workload_submit(user=user, project_id=project.id, spec_data={
        "name": "ends", "command": command, "gpu_class": "a100-80gb", "gpus_per_worker": 1,
        "cpus_per_worker": 1, "memory_gb_per_worker": 1, "time_limit_minutes": minutes})
    workload = workload_place(workload_id=workload.id)
    assert workload.state == "reserved", workload.raw_reason
    workload_dispatch(workload_id=workload.id)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        cluster_poll_status(cluster_id=cluster.id)
        workload.refresh_from_db()
        if workload.is_terminal:
            return workload
        time.sleep(1)
    pytest.fail(f"still {workload.state} after {timeout_s} s: {workload.raw_reason}")  # pragma: no cover


@pytest.mark.parametrize("transport", ["cli", "rest"])
def test_a_job_that_exits_3_shows_code_3_and_its_last_lines(transport, researcher, settings, monkeypatch,
                                                             slurm_env, client):
    (JOBDIR / "out").mkdir(parents=True, exist_ok=True)
    project, user = researcher
    cluster = _cluster(settings, monkeypatch, slurm_env, transport)
    workload = _run_to_end(cluster, project, user, 'for i in 1 2 3; do echo "step $i"; done; '
                                                   'echo "giving up at the end"; exit 3', 5, 90)

    assert workload.state == "failed", list(workload.attempts.values_list("error", flat=True))
    assert workload.outcome["exit_code"] == 3 and workload.outcome["end_reason"] == "FAILED"
    assert workload.outcome["summary"] == "exited with code 3"
    client.force_login(user)
    page = client.get(f"/workloads/{workload.id}/").content.decode()
    assert "exited with code 3" in page and "giving up at the end" in page and "step 3" in page
    tail = client.get(f"/api/v1/workloads/{workload.id}/logs/", {"tail": 2}).json()
    assert tail["lines"] == ["step 3", "giving up at the end"] and tail["offset"] == 2 and tail["ended"]


def test_a_job_past_its_time_limit_says_timeout_in_plain_words(researcher, settings, monkeypatch, slurm_env,
                                                                client):
    project, user = researcher
    cluster = _cluster(settings, monkeypatch, slurm_env, "cli")
    # Slurm checks limits about every 30 s: a 1-minute limit ends between 60 and ~100 s
    workload = _run_to_end(cluster, project, user, "echo started; sleep 600", 1, 180)

    assert workload.state == "failed"
    assert workload.outcome["end_reason"] == "TIMEOUT"
    assert workload.outcome["summary"] == "stopped at its time limit (TIMEOUT)"
    client.force_login(user)
    page = client.get(f"/workloads/{workload.id}/").content.decode()
    assert "stopped at its time limit (TIMEOUT)" in page and "started" in page
