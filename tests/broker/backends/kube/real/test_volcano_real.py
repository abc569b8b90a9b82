"""The Volcano backend against real vc-scheduler, vc-controller-manager and webhooks."""
from __future__ import annotations

from typing import Any, Iterator

import pytest
from kubernetes import client

from broker.backends.base import JobState, ProjectIdentity, Reason
from broker.spec import WorkloadSpec

from . import cluster as c

# Its own marker, not `k8s`: real Volcano does not run in CI yet (v1.15.1 does not build from
# the module proxy, v1.14.1's webhooks need the Helm chart's objects; docs/kubernetes.md).
pytestmark = pytest.mark.volcano


@pytest.fixture(autouse=True)
def _volcano_up(k8s_env):
    # Volcano is opt-in in scripts/k8s-cluster (K8S_CI_NO_VOLCANO=0): see docs/kubernetes.md
    if k8s_env.get("K8S_VOLCANO") != "1":
        pytest.skip("Volcano is not running: start it with K8S_CI_NO_VOLCANO=0 scripts/k8s-cluster up")
GANG_QUEUE = "gang-q"
SMALL_QUEUE = "small-q"


def spec(**kw: Any) -> WorkloadSpec:
    base: dict[str, Any] = dict(project="proj", name="gang", command="sleep 120",
                                gpus_per_worker=2, workers=4, gpu_models=("L40S",),
                                cpus_per_worker=1, memory_gb_per_worker=1, time_limit_minutes=10)
    base.update(kw)
    return WorkloadSpec(**base)


def identity(queue: str) -> ProjectIdentity:
    return ProjectIdentity(tenant="acme", project="proj", k8s_namespace=c.NAMESPACE, queue=queue)


@pytest.fixture
def three_nodes(main_api) -> Iterator[client.ApiClient]:
    core = client.CoreV1Api(main_api)
    c.apply(main_api, *c.volcano_nodes(3), c.volcano_queue(GANG_QUEUE),
            c.volcano_queue(SMALL_QUEUE, gpus=2))
    for extra in ("vc-3",):
        if core.list_node(field_selector=f"metadata.name={extra}").items:
            core.delete_node(extra)
    yield main_api
    core.delete_node("vc-3") if core.list_node(field_selector="metadata.name=vc-3").items else None


def capture_job(api: client.ApiClient, job_id: str, name: str) -> None:
    ns, job = job_id.split("/")
    custom = client.CustomObjectsApi(api)
    c.capture(f"volcano-job-{name}", custom.get_namespaced_custom_object(
        "batch.volcano.sh", "v1alpha1", ns, "jobs", job))
    for pg in custom.list_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", ns, "podgroups")["items"]:
        if any(o.get("name") == job for o in pg["metadata"].get("ownerReferences") or []):
            c.capture(f"volcano-podgroup-{name}", pg)


def status(backend, job_id):
    return backend.status([job_id]).get(job_id)


def test_gang_waits_while_three_of_four_fit_and_starts_when_four_do(volcano_backend, three_nodes):
    job_id = volcano_backend.submit(spec(), "wl-gang", identity(GANG_QUEUE))
    waiting = c.wait_for(lambda: (j := status(volcano_backend, job_id)) and j.reason != Reason.NONE
                         and j, 60, what="gang pending reason")
    capture_job(three_nodes, job_id, "gang-pending")
    assert waiting.state == JobState.PENDING
    assert waiting.reason == Reason.GANG, waiting.raw_reason
    pods = client.CoreV1Api(three_nodes).list_namespaced_pod(
        c.NAMESPACE, label_selector=f"volcano.sh/job-name={job_id.split('/')[1]}").items
    assert all(not p.spec.node_name for p in pods)  # nobody of the gang was bound
    c.apply(three_nodes, *c.volcano_nodes(4))
    running = c.wait_for(lambda: (j := status(volcano_backend, job_id))
                         and j.state == JobState.RUNNING and j, 90, what="gang running")
    capture_job(three_nodes, job_id, "gang-running")
    assert set(running.nodes) == {"vc-0", "vc-1", "vc-2", "vc-3"}


def test_queue_capability_keeps_a_bigger_job_out(volcano_backend, three_nodes):
    job_id = volcano_backend.submit(spec(workers=2, name="capped"), "wl-cap",
                                    identity(SMALL_QUEUE))
    waiting = c.wait_for(lambda: (j := status(volcano_backend, job_id)) and j.reason != Reason.NONE
                         and j, 60, what="capability pending reason")
    capture_job(three_nodes, job_id, "capability-pending")
    assert waiting.state == JobState.PENDING
    assert waiting.reason in (Reason.CAPACITY, Reason.POLICY), waiting.raw_reason
    fits = volcano_backend.submit(spec(workers=1, name="fits", command="sleep 5"), "wl-fits",
                                  identity(SMALL_QUEUE))
    c.wait_for(lambda: (j := status(volcano_backend, fits)) and j.state in (
        JobState.RUNNING, JobState.COMPLETED), 90, what="small job runs")
