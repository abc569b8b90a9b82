"""On the real Slurm cluster: two researchers submit through the portal to a project whose
jobs run as the person; each job runs as that person's POSIX user (squeue %u while it runs,
sacct User after) and its usage is charged to that person and the project.  Once through
sbatch --uid (the command transport, as root) and once through slurmrestd impersonation
(the SlurmUser token naming the person)."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time

import pytest

from accounting.chargeback import build_report
from accounting.models import UsageEntry
from accounting.periods import month_start
from accounting.services.usage import usage_collect
from broker.models import Cluster, Quota, Workload
from broker.services.dispatching.send import workload_dispatch
from broker.services.fleet.registration import gpu_classes_from_policy
from broker.services.fleet.inventory import cluster_sync_inventory
from broker.services.placing.cycle import workload_place
from broker.services.following.status import cluster_poll_status
from portal.identity.services.cluster_identity import cluster_identity_set, project_run_as_set
from tests.factories import MembershipFactory, ProjectFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.slurm


def _cluster_config(transport: str, env: dict[str, str], workdir: str) -> tuple[dict, str]:
    common = {"partition": "gpu", "image_pull_s": 0, "workdir": workdir}
    if transport == "cli":
        return {"transport": "cli", "submit_user": "root", **common}, ""
    return ({"transport": "rest", "rest_url": env["SLURMRESTD_URL"], "api_version": "auto",
             "user_name": env.get("SLURM_SLURMUSER", "slurm"), **common},
            f"file:{env['SLURM_JWT_SLURMUSER_FILE']}")


@pytest.fixture
def shared_workdir():
    """A fresh directory every person can write to.  Not /tmp itself: job ids repeat across
    the two Slurm versions CI runs, and a root-owned slurm-<id>.out left there by the other
    version's job (sticky /tmp) would stop gpb-alice's job from opening its output."""
    path = tempfile.mkdtemp(prefix="gpubroker-run-as-", dir="/tmp")
    os.chmod(path, 0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(params=["cli", "rest"])
def people_on_slurm(request, db, settings, slurm_env, shared_workdir):
    settings.GPUBROKER_ENABLE_SLURM = True
    settings.GPUBROKER_ENABLE_SIMULATOR = False
    config, credentials = _cluster_config(request.param, slurm_env, shared_workdir)
    cluster = Cluster.objects.create(name=f"ci-{request.param}", kind="slurm", region="eu-west",
                                     location="onprem", config=config, credentials_ref=credentials)
    tenant = TenantFactory(slug="physics")
    # the setup script associates gpb-alice and gpb-bob with "general"
    project = ProjectFactory(tenant=tenant, slug="lattice", slurm_account="general")
    admin = UserFactory(username="physics-admin")
    MembershipFactory(user=admin, tenant=tenant, role="admin")
    project = project_run_as_set(actor=admin, project=project, run_as="person")
    people = {}
    for name in ("alice", "bob"):
        user = UserFactory(username=name)
        MembershipFactory(user=user, tenant=tenant, role="researcher")
        cluster_identity_set(actor=admin, user=user, posix_user=f"gpb-{name}")
        people[name] = user
    classes = {c.slug: c for c in gpu_classes_from_policy()}
    Quota.objects.create(tenant=tenant, gpu_class=classes["a100-80gb"], limit_gpus=32)
    assert cluster_sync_inventory(cluster_id=cluster.id).health == "healthy"
    return cluster, project, people


def _wait(predicate, timeout_s: float = 90) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(1)
    return False


def _slurm(*args: str) -> str:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=30, check=True).stdout.strip()


def _submit_through_the_portal(client, user, project) -> Workload:
    client.force_login(user)
    resp = client.post("/api/v1/workloads/", content_type="application/json", data={
        "project": project.id, "name": f"as-{user.username}", "command": "sleep 20",
        "gpu_class": "a100-80gb", "gpus_per_worker": 2, "cpus_per_worker": 1,
        "memory_gb_per_worker": 1, "time_limit_minutes": 5})
    assert resp.status_code == 201, resp.content
    workload = workload_place(workload_id=resp.json()["id"])
    assert workload.state == "reserved", workload.raw_reason
    workload = workload_dispatch(workload_id=workload.id)
    assert workload.state == "queued" and workload.destination_job_id, workload.raw_reason
    return workload


def test_each_researchers_job_runs_as_them_and_is_charged_to_them(people_on_slurm, client):
    cluster, project, people = people_on_slurm
    jobs = {name: _submit_through_the_portal(client, user, project) for name, user in people.items()}

    def state(name: str) -> str:
        cluster_poll_status(cluster_id=cluster.id)
        return Workload.objects.get(id=jobs[name].id).state

    for name, wl in jobs.items():  # each sleeps 20 s: running when first seen
        assert _wait(lambda: state(name) == "running"), Workload.objects.get(id=wl.id).raw_reason
        assert _slurm("squeue", "-h", "-j", wl.destination_job_id, "-o", "%u %a") == f"gpb-{name} general"
    for name, wl in jobs.items():
        assert _wait(lambda: state(name) == "completed"), Workload.objects.get(id=wl.id).raw_reason
        assert _wait(lambda: _slurm("sacct", "-n", "-X", "-P", "-j", wl.destination_job_id, "-o", "User,Account")
                     == f"gpb-{name}|general", 30)

    report = usage_collect(cluster_id=cluster.id)
    assert not report.stale, report.error
    for name, wl in jobs.items():
        entry = UsageEntry.objects.get(cluster=cluster, job_id=wl.destination_job_id)
        assert (entry.cluster_user, entry.user, entry.project, entry.workload_id) == (
            f"gpb-{name}", people[name], project, wl.id)
        assert entry.gpu_seconds >= 2 * 20
    month = month_start(UsageEntry.objects.get(job_id=jobs["alice"].destination_job_id, cluster=cluster).end)
    rows = build_report(months=[month], tenant_ids={project.tenant_id}).rows
    charged = {(r.project, r.user) for r in rows if r.onprem_seconds}
    assert {("lattice", "alice"), ("lattice", "bob")} <= charged


def test_account_check_adds_the_associations_of_the_people_a_project_runs_as(db, settings, slurm_env):
    import uuid

    from broker.services.fleet.identity import slurm_accounts_ensure

    settings.GPUBROKER_ENABLE_SLURM = True
    Cluster.objects.create(name="ci-accounts", kind="slurm", region="eu-west", location="onprem",
                           config={"transport": "cli", "partition": "gpu", "submit_user": "root"})
    tenant = TenantFactory(slug="physics")
    account = "bk" + uuid.uuid4().hex[:8]  # a fresh Slurm account each run
    project = ProjectFactory(tenant=tenant, slug="lattice", slurm_account=account)
    admin, alice = UserFactory(username="physics-admin"), UserFactory(username="alice")
    MembershipFactory(user=admin, tenant=tenant, role="admin")
    MembershipFactory(user=alice, tenant=tenant, role="researcher")
    cluster_identity_set(actor=admin, user=alice, posix_user="gpb-alice")
    project_run_as_set(actor=admin, project=project, run_as="person")
    [check] = slurm_accounts_ensure(create=True)
    assert check.created and check.exists, check.detail
    users = _slurm("sacctmgr", "-n", "-P", "show", "assoc", "where", f"account={account}", "format=user").split()
    assert sorted(users) == ["gpb-alice", "root"]
