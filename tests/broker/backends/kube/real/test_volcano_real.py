"""The Volcano backend against real vc-scheduler, vc-controller-manager and webhooks."""
from __future__ import annotations

from typing import Any, Iterator

import pytest
from kubernetes import client

from broker.backends.base import JobState, ProjectIdentity, Reason, Rejected
from broker.spec import WorkloadSpec

from . import cluster as c

# Part of `k8s` (required in CI); `volcano` selects them alone.
pytestmark = [pytest.mark.k8s, pytest.mark.volcano]


@pytest.fixture(autouse=True)
def _volcano_up(k8s_env):
    # With K8S_TESTS=1 a main cluster started without Volcano (K8S_CI_NO_VOLCANO=1) fails
    # these tests: they never skip in CI.
    assert k8s_env.get("K8S_VOLCANO") == "1", \
        "Volcano is not running in the main cluster: scripts/k8s-cluster up (K8S_CI_NO_VOLCANO unset)"


GANG_QUEUE = "gang-q"
SMALL_QUEUE = "small-q"


def spec(**kw: Any) -> WorkloadSpec:
    base: dict[str, Any] = {
        "project": "proj", "name": "gang", "command": "sleep 120", "gpus_per_worker": 2,
        "workers": 4, "gpu_models": ("L40S",), "cpus_per_worker": 1,
        "memory_gb_per_worker": 1, "time_limit_minutes": 10}
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
            events = client.CoreV1Api(api).list_namespaced_event(
                ns, field_selector=f"involvedObject.uid={pg['metadata']['uid']}")
            c.capture(f"volcano-podgroup-events-{name}", sorted(
                {f"{e.type} {e.reason}: {e.message}" for e in events.items}))


def status(backend, job_id):
    return backend.status([job_id]).get(job_id)


def test_gang_waits_while_three_of_four_fit_and_starts_when_four_do(volcano_backend, three_nodes):
    job_id = volcano_backend.submit(spec(), "wl-gang", identity(GANG_QUEUE))
    waiting = c.wait_for(lambda: (j := status(volcano_backend, job_id)) and j.reason not in (
        Reason.NONE, Reason.OTHER) and j, 60, what="gang pending reason")
    capture_job(three_nodes, job_id, "gang-pending")
    assert waiting.state == JobState.PENDING
    assert waiting.reason == Reason.GANG, waiting.raw_reason
    pods = client.CoreV1Api(three_nodes).list_namespaced_pod(
        c.NAMESPACE, label_selector=f"volcano.sh/job-name={job_id.split('/')[1]}").items
    assert all(not p.spec.node_name for p in pods)  # nobody of the gang was bound
    assert volcano_backend.queue_stats().pending_gpus == 8  # 4 x 2, counted once
    c.apply(three_nodes, *c.volcano_nodes(4))
    running = c.wait_for(lambda: (j := status(volcano_backend, job_id))
                         and j.state == JobState.RUNNING and j, 90, what="gang running")
    capture_job(three_nodes, job_id, "gang-running")
    assert set(running.nodes) == {"vc-0", "vc-1", "vc-2", "vc-3"}


def test_queue_capability_keeps_a_bigger_job_out(volcano_backend, three_nodes):
    job_id = volcano_backend.submit(spec(workers=2, name="capped"), "wl-cap",
                                    identity(SMALL_QUEUE))
    waiting = c.wait_for(lambda: (j := status(volcano_backend, job_id)) and j.reason not in (
        Reason.NONE, Reason.OTHER) and j, 60, what="capability pending reason")
    capture_job(three_nodes, job_id, "capability-pending")
    assert waiting.state == JobState.PENDING
    assert waiting.reason in (Reason.CAPACITY, Reason.POLICY), waiting.raw_reason
    fits = volcano_backend.submit(spec(workers=1, name="fits", command="sleep 5"), "wl-fits",
                                  identity(SMALL_QUEUE))
    c.wait_for(lambda: (j := status(volcano_backend, fits)) and j.state in (
        JobState.RUNNING, JobState.COMPLETED), 90, what="small job runs")


def test_webhook_defaults_the_job_and_keeps_our_terminate_policies(volcano_backend, three_nodes):
    job_id = volcano_backend.submit(spec(workers=1, name="dflt", command="sleep 5"), "wl-dflt",
                                    identity(GANG_QUEUE))
    ns, name = job_id.split("/")
    job = client.CustomObjectsApi(three_nodes).get_namespaced_custom_object(
        "batch.volcano.sh", "v1alpha1", ns, "jobs", name)
    c.capture("volcano-job-defaulted", job)
    # maxRetry 0 reads as unset to the mutating webhook: it writes its default, 3
    assert job["spec"]["maxRetry"] == 3 and job["spec"]["tasks"][0]["minAvailable"] == 1
    assert {"event": "PodFailed", "action": "TerminateJob"} in job["spec"]["policies"]


def test_webhook_refuses_a_gang_larger_than_its_tasks(volcano_backend, three_nodes, monkeypatch):
    original = volcano_backend.build_manifest

    def too_big(*args: Any) -> dict[str, Any]:
        body = original(*args)
        body["spec"]["minAvailable"] = 5  # more than the 4 replicas
        return body
    monkeypatch.setattr(volcano_backend, "build_manifest", too_big)
    with pytest.raises(Rejected) as err:
        volcano_backend.submit(spec(), "wl-bad", identity(GANG_QUEUE))
    c.capture("volcano-webhook-denied-minavailable", err.value.raw)
    assert 'admission webhook "validatejob.volcano.sh" denied the request' in str(err.value)
    assert "'minAvailable' should not be greater than total replicas" in str(err.value)


def test_submit_into_a_missing_queue_is_refused_by_the_webhook(volcano_backend, three_nodes):
    with pytest.raises(Rejected) as err:
        volcano_backend.submit(spec(workers=1), "wl-noq", identity("no-such-queue"))
    c.capture("volcano-webhook-denied-missing-queue", err.value.raw)
    assert 'unable to find job queue: queue.scheduling.volcano.sh "no-such-queue" not found' \
        in str(err.value)


def test_inventory_reports_queue_capability_minus_what_volcano_allocated(volcano_backend,
                                                                        three_nodes):
    c.apply(three_nodes, c.volcano_queue("limits-q", gpus=6))

    def quota():
        return next((q for q in volcano_backend.inventory().limits.quotas
                     if q.scope == "limits-q"), None)
    idle = c.wait_for(quota, 30, what="limits-q in the inventory's local limits")
    assert (idle.limit_gpus, idle.used_gpus) == (6, 0)
    volcano_backend.submit(spec(workers=2, name="lim", command="sleep 60"), "wl-lim",
                           identity("limits-q"))
    # status.allocated of the Queue counts the running gang's GPUs
    # (data/real/volcano-queue-capability-running.json: nvidia.com/gpu "4" of capability "6")
    busy = c.wait_for(lambda: (q := quota()) and q.used_gpus == 4 and q, 90,
                      what="allocated GPUs of limits-q")
    assert busy.headroom_gpus == 2 and "capability nvidia.com/gpu=6" in busy.source
