"""The MultiKueue backend: submitted on a real manager, run on a real worker cluster."""
from __future__ import annotations

import pytest
from kubernetes import client

from broker.backends.base import JobState

from . import cluster as c
from .conftest import IDENTITY
from .test_kueue_real import spec

pytestmark = pytest.mark.k8s


def status(backend, job_id):
    return backend.status([job_id]).get(job_id)


def test_job_submitted_on_the_manager_runs_on_the_worker_and_cancels_back(
        multikueue_backend, main_api):
    job_id = multikueue_backend.submit(spec(command="sleep 300", gpus_per_worker=2),
                                       "wl-mk", IDENTITY)
    running = c.wait_for(lambda: (j := status(multikueue_backend, job_id))
                         and j.state == JobState.RUNNING and j, 120, what="admitted via worker")
    ns, name = job_id.split("/")
    c.capture("multikueue-manager-workload-admitted", client.CustomObjectsApi(
        multikueue_backend.kube._client()).list_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", ns, "workloads")["items"][0])
    kube = multikueue_backend.kube
    c.capture("multikueue-manager-job-running", kube.call(kube.batch().read_namespaced_job, name, ns))
    assert running.worker_cluster == "worker-main"
    worker_pods = client.CoreV1Api(main_api).list_namespaced_pod(
        ns, label_selector=f"batch.kubernetes.io/job-name={name}").items
    assert worker_pods and all(p.spec.node_name in ("a100-0", "a100-1") for p in worker_pods)
    inv = multikueue_backend.inventory()
    assert {p.name.split("/")[0] for p in inv.pools} == {"worker-main"}

    c.wait_for(lambda: multikueue_backend.cancel(job_id), 60, every=0.5, what="manager job gone")
    c.wait_for(lambda: not client.BatchV1Api(main_api).list_namespaced_job(
        ns, field_selector=f"metadata.name={name}").items, 60, what="worker job gone")


def test_finished_on_the_worker_is_finished_on_the_manager(multikueue_backend):
    job_id = multikueue_backend.submit(spec(command="sleep 3"), "wl-mk-done", IDENTITY)
    done = c.wait_for(lambda: (j := status(multikueue_backend, job_id))
                      and j.state == JobState.COMPLETED and j, 120, what="completed")
    assert done.ended_at is not None
