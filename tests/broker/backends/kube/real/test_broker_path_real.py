"""The broker's own services end to end on the real Kueue cluster: inventory, placement,
reservation, dispatch, following, cancellation and usage."""
from __future__ import annotations

import pytest
from kubernetes import client

from accounting.models import UsageEntry
from accounting.services.usage import usage_collect
from broker.models import Cluster, Quota, Workload
from broker.services.following.cancel import cancel_propagate
from broker.services.dispatching.send import workload_dispatch
from broker.services.fleet.registration import gpu_classes_from_policy
from broker.services.fleet.inventory import cluster_sync_inventory
from broker.services.placing.cycle import workload_place
from broker.services.following.status import cluster_poll_status
from broker.services.submitting.workloads import workload_cancel, workload_submit
from tests.factories import MembershipFactory, ProjectFactory, TenantFactory, UserFactory

from . import cluster as c

pytestmark = pytest.mark.k8s
# product label -> the model names the policy's GPU classes use
POLICY_MODELS = {c.A100: "NVIDIA A100-SXM4-80GB", c.H100: "NVIDIA H100 80GB HBM3",
                 c.A100_40: "NVIDIA A100-SXM4-40GB"}


@pytest.fixture
def real_kueue(db, settings, k8s_env, kueue_cluster):
    settings.GPUBROKER_ENABLE_KUEUE = True
    settings.GPUBROKER_ENABLE_SIMULATOR = False
    return Cluster.objects.create(
        name="ci-kueue", kind="kueue", region="eu-west", location="onprem",
        config={"kubeconfig": k8s_env["K8S_MAIN_KUBECONFIG"], "queue": "default",
                "model_names": POLICY_MODELS})


@pytest.fixture
def researcher(db):
    tenant = TenantFactory(slug="physics")
    project = ProjectFactory(tenant=tenant, slug="lattice", k8s_namespace=c.NAMESPACE)
    user = UserFactory(username="r1")
    MembershipFactory(user=user, tenant=tenant, role="researcher")
    classes = {g.slug: g for g in gpu_classes_from_policy()}
    Quota.objects.create(tenant=tenant, gpu_class=classes["a100-80gb"], limit_gpus=32)
    return project, user


def submit_and_dispatch(project, user, name: str, command: str) -> Workload:
    workload = workload_submit(user=user, project_id=project.id, spec_data={
        "name": name, "command": command, "gpu_class": "a100-80gb", "gpus_per_worker": 2,
        "workers": 2, "cpus_per_worker": 1, "memory_gb_per_worker": 1, "time_limit_minutes": 10})
    workload = workload_place(workload_id=workload.id)
    assert workload.state == "reserved", workload.raw_reason
    workload_dispatch(workload_id=workload.id)
    workload.refresh_from_db()
    assert workload.state == "queued" and workload.destination_job_id.startswith(f"{c.NAMESPACE}/")
    return workload


def state_after_poll(cluster: Cluster, workload: Workload) -> str:
    cluster_poll_status(cluster_id=cluster.id)
    return Workload.objects.get(id=workload.id).state


def test_broker_places_dispatches_follows_cancels_and_bills_on_real_kueue(
        real_kueue, researcher, main_api):
    project, user = researcher
    cluster = cluster_sync_inventory(cluster_id=real_kueue.id)
    assert cluster.health == "healthy", cluster.last_error
    assert {p.name for p in cluster.pools.all()} >= {"a100", "h100"}

    done = submit_and_dispatch(project, user, "kueue-done", "sleep 4")
    ns, name = done.destination_job_id.split("/")
    job = client.BatchV1Api(main_api).read_namespaced_job(name, ns)
    assert job.metadata.labels["kueue.x-k8s.io/queue-name"] == "default"
    c.wait_for(lambda: state_after_poll(real_kueue, done) == "completed", 120, 1, "completed")
    usage_collect(cluster_id=real_kueue.id)
    entry = UsageEntry.objects.get(cluster=real_kueue, workload=done)
    assert entry.project == project and entry.gpu_seconds > 0 and entry.end is not None

    held = submit_and_dispatch(project, user, "kueue-cancel", "sleep 300")
    c.wait_for(lambda: state_after_poll(real_kueue, held) == "running", 120, 1, "running")
    workload_cancel(user=user, workload_id=held.id)
    c.wait_for(lambda: cancel_propagate(workload_id=held.id).state == "cancelled", 60, 1, "cancelled")
    assert Workload.objects.get(id=held.id).reservations.get().state == "released"
    ns, name = held.destination_job_id.split("/")
    assert not client.BatchV1Api(main_api).list_namespaced_job(
        ns, field_selector=f"metadata.name={name}").items
