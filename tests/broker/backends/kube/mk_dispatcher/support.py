"""Objects and helpers of the dispatcher-mode tests: a MultiKueue manager whose Kueue runs
with our dispatcher name, and two worker clusters (`main`, `worker2`) with kwok GPU nodes.
Started by `K8S_CI_RUN=/run/k8s-mkd K8S_CI_PORT_BASE=16600 K8S_CI_WORKER2=1
K8S_CI_NO_VOLCANO=1 K8S_CI_MK_DISPATCHER=gpubroker.io/dispatcher scripts/k8s-cluster up`
(.ci/setup.d/k8s-mkd.sh)."""
from __future__ import annotations

from typing import Any

from kubernetes import client

from tests.broker.backends.kube.real import cluster as c

NS = "mkd"
KV = c.KV
WORKERS = {"worker-main": "K8S_MAIN_KUBECONFIG", "worker-worker2": "K8S_WORKER2_KUBECONFIG"}


def namespace() -> dict[str, Any]:
    return c.namespace(NS)


def local_queue(cq: str) -> dict[str, Any]:
    return {"apiVersion": KV, "kind": "LocalQueue", "metadata": {"name": "default", "namespace": NS},
            "spec": {"clusterQueue": cq}}


def worker_objects(stopped: bool = False) -> list[dict[str, Any]]:
    """A worker's Kueue: the suite's flavors and ClusterQueue (8 A100s), its LocalQueue in
    our namespace.  ``stopped``: the ClusterQueue admits nothing (stopPolicy Hold)."""
    cq = c.cluster_queue("mkd-cq")
    cq["spec"]["stopPolicy"] = "Hold" if stopped else "None"
    return [namespace(), c.flavor("default-flavor", None), c.flavor("a100", c.A100), c.flavor("h100", c.H100),
            c.flavor("a100-mig", c.A100_40), cq, local_queue("mkd-cq")]


def worker_nodes(prefix: str) -> list[dict[str, Any]]:
    return [c.node(f"{prefix}-a100-0", c.A100, 4), c.node(f"{prefix}-a100-1", c.A100, 4)]


def manager_objects(secrets: dict[str, str]) -> list[dict[str, Any]]:
    mk = KV
    clusters = [{"apiVersion": mk, "kind": "MultiKueueCluster", "metadata": {"name": name},
                 "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": secret}}}}
                for name, secret in secrets.items()]
    return [namespace(), c.flavor("default-flavor", None), c.flavor("a100", c.A100), c.flavor("h100", c.H100),
            c.flavor("a100-mig", c.A100_40), *clusters,
            {"apiVersion": mk, "kind": "MultiKueueConfig", "metadata": {"name": "mkd-config"},
             "spec": {"clusters": sorted(secrets)}},
            {"apiVersion": mk, "kind": "AdmissionCheck", "metadata": {"name": "mkd-check"},
             "spec": {"controllerName": "kueue.x-k8s.io/multikueue",
                      "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig",
                                     "name": "mkd-config"}}},
            c.cluster_queue("mkd-cq", a100=16, checks=("mkd-check",)), local_queue("mkd-cq")]


def job(name: str, *, pods: int = 1, gpus: int = 1, seconds: int = 20,
        annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A plain batch Job, as a user of the manager would submit it with kubectl."""
    container = {"name": "main", "image": "busybox", "command": ["sh", "-c", f"sleep {seconds}"],
                 "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
                               "limits": {"nvidia.com/gpu": str(gpus)}}}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "default"},
                         "annotations": annotations or {}},
            "spec": {"parallelism": pods, "completions": pods, "suspend": True, "backoffLimit": 0,
                     "template": {"spec": {"restartPolicy": "Never", "containers": [container],
                                           "nodeSelector": {"nvidia.com/gpu.product": c.A100},
                                           "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}}}}


def create_job(api: client.ApiClient, body: dict[str, Any]) -> None:
    client.BatchV1Api(api).create_namespaced_job(NS, body)


def workloads(api: client.ApiClient) -> list[dict[str, Any]]:
    return client.CustomObjectsApi(api).list_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", NS, "workloads")["items"]


def workload_of_job(api: client.ApiClient, job_name: str) -> dict[str, Any] | None:
    for wl in workloads(api):
        if any(r.get("name") == job_name for r in wl["metadata"].get("ownerReferences") or []):
            return wl
    return None


def delete_all(api: client.ApiClient) -> None:
    client.BatchV1Api(api).delete_collection_namespaced_job(NS, propagation_policy="Background")
    custom = client.CustomObjectsApi(api)
    custom.delete_collection_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", NS, "workloads")

    def gone() -> bool:
        return not (client.BatchV1Api(api).list_namespaced_job(NS).items or workloads(api)
                    or client.CoreV1Api(api).list_namespaced_pod(NS).items)

    c.wait_for(gone, 90, what=f"jobs, workloads and pods of {NS} gone")
