"""The Kueue backend against a real kube-apiserver, Kueue v0.19 and kwok GPU nodes."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from kubernetes import client

from broker.backends.base import JobState, Reason
from broker.spec import WorkloadSpec

from . import cluster as c
from .conftest import IDENTITY

pytestmark = pytest.mark.k8s


def spec(**kw: Any) -> WorkloadSpec:
    base: dict[str, Any] = dict(project="proj", name="train", command="sleep 5",
                                gpus_per_worker=1, workers=1, gpu_models=("A100-80GB",),
                                cpus_per_worker=1, memory_gb_per_worker=1, time_limit_minutes=10)
    base.update(kw)
    return WorkloadSpec(**base)


def kueue_backend_api(backend) -> client.ApiClient:
    return backend.kube._client()


def state_of(backend, job_id: str):
    return backend.status([job_id]).get(job_id)


def wait_state(backend, job_id: str, *states: JobState, timeout_s: float = 90):
    return c.wait_for(lambda: (j := state_of(backend, job_id)) and j.state in states and j,
                      timeout_s, what=f"{job_id} in {states}")


def workload_of_job(api: client.ApiClient, job_id: str) -> dict[str, Any] | None:
    ns, name = job_id.split("/")
    job = client.BatchV1Api(api).read_namespaced_job(name, ns)
    wls = client.CustomObjectsApi(api).list_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", ns, "workloads",
        label_selector=f"kueue.x-k8s.io/job-uid={job.metadata.uid}")["items"]
    assert len(wls) <= 1, wls
    return wls[0] if wls else None


def test_job_is_admitted_runs_on_kwok_nodes_finishes_and_is_billed(kueue_backend, main_api):
    since = datetime.now(timezone.utc) - timedelta(seconds=5)
    job_id = kueue_backend.submit(spec(gpus_per_worker=2, workers=2, command="sleep 6"),
                                  "wl-run", IDENTITY)
    running = wait_state(kueue_backend, job_id, JobState.RUNNING, JobState.COMPLETED)
    if running.state == JobState.RUNNING:
        assert running.nodes and set(running.nodes) <= {"a100-0", "a100-1"}
    done = wait_state(kueue_backend, job_id, JobState.COMPLETED)
    assert done.reason == Reason.NONE and done.started_at and done.ended_at
    # the Job's Complete condition can come before Kueue marks the Workload Finished (its status
    # update retried after a conflict: seen in CI under load), and usage reads the Workload
    wl = c.wait_for(lambda: _finished(workload_of_job(main_api, job_id)), 30, what="Workload Finished")
    c.capture("kueue-workload-finished", wl)
    records = [r for r in kueue_backend.usage(since) if r.job_id == job_id]
    assert len(records) == 1
    rec = records[0]
    assert (rec.gpus, rec.gpu_model, rec.state, rec.account) == (4, "A100-80GB", "completed", "team")
    assert rec.end and rec.gpu_seconds == 4 * int((rec.end - rec.start).total_seconds())


def _finished(wl: dict[str, Any] | None) -> dict[str, Any] | None:
    conditions = {x["type"]: x["status"] for x in ((wl or {}).get("status") or {}).get("conditions") or []}
    return wl if conditions.get("Finished") == "True" else None


def test_mig_slices_are_admitted_on_the_mig_flavor(kueue_backend, main_api):
    job_id = kueue_backend.submit(spec(gpu_models=("A100-40GB",), mig_profile=c.MIG,
                                       gpus_per_worker=3, command="sleep 30"), "wl-mig", IDENTITY)
    running = wait_state(kueue_backend, job_id, JobState.RUNNING)
    assert running.nodes == ("mig-0",)
    wl = workload_of_job(main_api, job_id)
    c.capture("kueue-workload-admitted-mig", wl)
    psa = wl["status"]["admission"]["podSetAssignments"][0]
    assert psa["flavors"][f"nvidia.com/mig-{c.MIG}"] == "a100-mig"


def test_insufficient_quota_waits_with_kueues_message_as_capacity(kueue_backend):
    first = kueue_backend.submit(spec(gpus_per_worker=4, workers=2, command="sleep 120"),
                                 "wl-big", IDENTITY)
    wait_state(kueue_backend, first, JobState.RUNNING)
    second = kueue_backend.submit(spec(gpus_per_worker=4, command="sleep 5"), "wl-wait", IDENTITY)
    # (before Kueue made the Workload the text is ours: "no Kueue Workload yet")
    waiting = c.wait_for(lambda: (j := state_of(kueue_backend, second)) and "quota" in j.raw_reason
                         and j.state == JobState.PENDING and j, 60, what="Kueue's pending message")
    c.capture("kueue-workload-pending-quota", workload_of_job(kueue_backend_api(kueue_backend), second))
    assert waiting.reason == Reason.CAPACITY, waiting.raw_reason
    assert "insufficient unused quota for nvidia.com/gpu in flavor a100" in waiting.raw_reason


def test_request_above_the_clusterqueue_maximum_is_never_admissible(kueue_backend):
    job_id = kueue_backend.submit(spec(gpus_per_worker=4, workers=4), "wl-huge", IDENTITY)
    waiting = c.wait_for(lambda: (j := state_of(kueue_backend, job_id))
                         and "maximum capacity" in j.raw_reason and j, 60,
                         what="Kueue's pending message")
    c.capture("kueue-workload-pending-above-max", workload_of_job(kueue_backend_api(kueue_backend), job_id))
    assert waiting.state == JobState.PENDING
    assert waiting.reason == Reason.POLICY, waiting.raw_reason


def test_cancel_is_confirmed_only_when_job_and_pods_are_gone(kueue_backend, main_api):
    job_id = kueue_backend.submit(spec(gpus_per_worker=1, workers=2, command="sleep 300"),
                                  "wl-cancel", IDENTITY)
    wait_state(kueue_backend, job_id, JobState.RUNNING)
    ns, name = job_id.split("/")
    core, batch = client.CoreV1Api(main_api), client.BatchV1Api(main_api)
    answers = []

    def cancelled() -> bool:
        answers.append(kueue_backend.cancel(job_id))
        if answers[-1]:
            # confirmed: nothing of the job may remain
            assert not batch.list_namespaced_job(ns, field_selector=f"metadata.name={name}").items
            assert not core.list_namespaced_pod(
                ns, label_selector=f"batch.kubernetes.io/job-name={name}").items
        return answers[-1]

    c.wait_for(cancelled, 60, every=0.2, what="cancel confirmed")
    assert kueue_backend.find("wl-cancel") is None


def test_lost_reply_resubmit_adopts_and_find_sees_the_job(kueue_backend, main_api):
    job_id = kueue_backend.submit(spec(command="sleep 60"), "wl-lost", IDENTITY)
    # the reply was lost: the broker submits again with the same workload id
    assert kueue_backend.submit(spec(command="sleep 60"), "wl-lost", IDENTITY) == job_id
    found = kueue_backend.find("wl-lost")
    assert found is not None and found.job_id == job_id
    assert len(client.BatchV1Api(main_api).list_namespaced_job(
        c.NAMESPACE, label_selector="gpubroker.io/workload-id=wl-lost").items) == 1


def test_priority_class_label_sets_the_workload_priority(kueue_backend, main_api):
    job_id = kueue_backend.submit(spec(priority="high", command="sleep 5"), "wl-prio", IDENTITY)
    wl = c.wait_for(lambda: workload_of_job(main_api, job_id), 30, what="workload")
    assert wl["spec"]["priority"] == 1000
    assert "gpubroker-high" in str(wl["spec"].get("priorityClassRef") or
                                   wl["spec"].get("priorityClassName"))


def test_a_gang_that_checks_its_gpus_is_accepted_admitted_and_started_with_its_check_rendered(
        kueue_backend, main_api):
    # kwok runs no container, so the check itself cannot fail here: what shows is the real API
    # server and Kueue taking the init container (the worker's GPUs, the node from the
    # downward API) and the gang admitted and placed as before
    job_id = kueue_backend.submit(spec(gpus_per_worker=2, workers=2, command="sleep 6", gpu_check=True),
                                  "wl-check", IDENTITY)
    ns, name = job_id.split("/")
    template = client.BatchV1Api(main_api).read_namespaced_job(name, ns).spec.template.spec
    [check] = template.init_containers
    assert check.name == "gpu-check" and check.resources.limits["nvidia.com/gpu"] == "2"
    node = [e.value_from.field_ref.field_path for e in check.env if e.name == "GPUBROKER_NODE"]
    assert node == ["spec.nodeName"]
    wl = c.wait_for(lambda: workload_of_job(main_api, job_id), 30, what="the Workload")
    limits = wl["spec"]["podSets"][0]["template"]["spec"]["initContainers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == "2", limits
    running = wait_state(kueue_backend, job_id, JobState.RUNNING, JobState.COMPLETED)
    assert running.state in (JobState.RUNNING, JobState.COMPLETED)
