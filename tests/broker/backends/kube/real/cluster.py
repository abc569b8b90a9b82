"""The objects the real-cluster tests stand on: kwok GPU nodes, Kueue flavors and queues,
Volcano queues, the MultiKueue wiring.  Applied with server-side apply, so every test
module can ask for them again; each test removes only the jobs it made."""
from __future__ import annotations

from typing import Any, Iterable

from kubernetes import client, config, dynamic
from kubernetes.client.exceptions import ApiException

from tests.support.waiting import wait_for  # noqa: F401  (c.wait_for, as the tests call it)

A100 = "NVIDIA-A100-SXM4-80GB"
H100 = "NVIDIA-H100-80GB-HBM3"
A100_40 = "NVIDIA-A100-SXM4-40GB"
L40S = "NVIDIA-L40S"
MIG = "1g.5gb"
NAMESPACE = "team"
KV = "kueue.x-k8s.io/v1beta2"
VC = "scheduling.volcano.sh/v1beta1"
MANAGER = "gpubroker-tests"


def api_client(kubeconfig: str) -> client.ApiClient:
    return config.new_client_from_config(config_file=kubeconfig)


def apply(api: client.ApiClient, *docs: dict[str, Any]) -> None:
    dyn = dynamic.DynamicClient(api)
    for doc in docs:
        res = dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        meta = doc["metadata"]
        res.server_side_apply(body=doc, name=meta["name"], namespace=meta.get("namespace"),
                              field_manager=MANAGER, force_conflicts=True)


def node(name: str, product: str, gpus: int = 0, memory_mib: int = 81920,
         mig: dict[str, int] | None = None, pool: str = "kueue") -> dict[str, Any]:
    """A kwok-managed node advertising GPUs the way the NVIDIA device plugin and GPU
    feature discovery do (mixed MIG strategy: one resource per profile)."""
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    if gpus:
        resources["nvidia.com/gpu"] = str(gpus)
    for profile, count in (mig or {}).items():
        resources[f"nvidia.com/mig-{profile}"] = str(count)
    labels = {"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
              "gpubroker.test/pool": pool, "nvidia.com/gpu.product": product,
              "nvidia.com/gpu.memory": str(memory_mib), "nvidia.com/gpu.count": str(gpus)}
    if mig:
        labels["nvidia.com/mig.strategy"] = "mixed"
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels,
                         "annotations": {"kwok.x-k8s.io/node": "fake"}},
            "spec": {},
            "status": {"allocatable": resources, "capacity": resources,
                       "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux",
                                    "kubeletVersion": "fake"}}}


def rack_node(name: str, rack: str, *, pool: str, product: str = A100, gpus: int = 4, **kw: Any) -> dict[str, Any]:
    """A GPU node in a rack: its interconnect label (the broker's default,
    nvidia.com/gpu.clique) says which."""
    doc = node(name, product, gpus, pool=pool, **kw)
    doc["metadata"]["labels"]["nvidia.com/gpu.clique"] = rack
    return doc


def pods_nodes(api: client.ApiClient, job_id: str, label: str = "job-name") -> list[str]:
    """The nodes the job's pods are bound to, sorted ("" for a pod not bound yet)."""
    namespace, name = job_id.split("/")
    pods = client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=f"{label}={name}").items
    return sorted((p.spec.node_name or "") for p in pods)


def delete_nodes(api: client.ApiClient, *names: str) -> None:
    """Remove nodes a test added (gone already is fine)."""
    for name in names:
        try:
            client.CoreV1Api(api).delete_node(name)
        except ApiException as exc:
            if exc.status != 404:
                raise


def ready_nodes(api: client.ApiClient, pool: str) -> int:
    """How many of the pool's kwok nodes report Ready."""
    nodes = client.CoreV1Api(api).list_node(label_selector=f"gpubroker.test/pool={pool}").items
    return sum(1 for n in nodes for cond in (n.status.conditions or [])
               if cond.type == "Ready" and cond.status == "True")


def pool_of(backend: Any, node_name: str) -> Any:
    """The inventory's pool holding ``node_name``, once the backend reports it, else None."""
    return next((p for p in backend.inventory().pools if any(n.name == node_name for n in p.nodes)), None)


def add_node_and_read(api: client.ApiClient, backend: Any, doc: dict[str, Any]) -> tuple[Any, Any]:
    """Add the node ``doc`` (in place of one of its name) and wait until ``backend`` reports
    it: (its pool, its NodeInventory)."""
    name = doc["metadata"]["name"]
    delete_nodes(api, name)
    apply(api, doc)
    pool = wait_for(lambda: pool_of(backend, name), 60, what=f"{name} in the inventory")
    return pool, next(n for n in pool.nodes if n.name == name)


def kueue_nodes() -> list[dict[str, Any]]:
    return [node("a100-0", A100, 4), node("a100-1", A100, 4), node("h100-0", H100, 8),
            node("mig-0", A100_40, 0, memory_mib=40960, mig={MIG: 7})]


def flavor(name: str, product: str | None) -> dict[str, Any]:
    spec = {"nodeLabels": {"nvidia.com/gpu.product": product}} if product else {}
    return {"apiVersion": KV, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def cluster_queue(name: str, a100: int = 8, h100: int = 8, mig: int = 7,
                  checks: Iterable[str] = ()) -> dict[str, Any]:
    """cpu and memory in a group of their own with a label-free flavor: a GPU flavor's
    node labels must not be forced on the MIG pods' cpu, nor the other way round."""
    def quota(flavor_name: str, resource: str, amount: Any) -> dict[str, Any]:
        return {"name": flavor_name, "resources": [{"name": resource, "nominalQuota": amount}]}

    groups = [
        {"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default-flavor", "resources": [
            {"name": "cpu", "nominalQuota": 1000}, {"name": "memory", "nominalQuota": "8Ti"}]}]},
        {"coveredResources": ["nvidia.com/gpu"],
         "flavors": [quota("a100", "nvidia.com/gpu", a100), quota("h100", "nvidia.com/gpu", h100)]},
        {"coveredResources": [f"nvidia.com/mig-{MIG}"],
         "flavors": [quota("a100-mig", f"nvidia.com/mig-{MIG}", mig)]}]
    spec: dict[str, Any] = {"namespaceSelector": {}, "resourceGroups": groups}
    if checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": c} for c in checks]}
    return {"apiVersion": KV, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(name: str, cq: str) -> dict[str, Any]:
    return {"apiVersion": KV, "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": NAMESPACE}, "spec": {"clusterQueue": cq}}


def namespace(name: str = NAMESPACE) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
            "metadata": {"name": name}, "value": value, "description": "gpubroker tests"}


def kueue_objects() -> list[dict[str, Any]]:
    # low below 0: the broker sends no class for "normal" (priority 0), so a low class above
    # 0 would outrank normal work (it did, at 10, until the calibration showed it)
    return [namespace(), flavor("default-flavor", None), flavor("a100", A100),
            flavor("h100", H100), flavor("a100-mig", A100_40), cluster_queue("gpu-cq"),
            local_queue("default", "gpu-cq"), priority_class("gpubroker-low", -10),
            priority_class("gpubroker-high", 1000)]


def volcano_nodes(count: int) -> list[dict[str, Any]]:
    return [node(f"vc-{i}", L40S, 2, memory_mib=46068, pool="volcano") for i in range(count)]


def volcano_queue(name: str, gpus: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"weight": 1, "reclaimable": True}
    if gpus is not None:
        spec["capability"] = {"nvidia.com/gpu": str(gpus)}
    return {"apiVersion": VC, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def multikueue_manager_objects(secret: str) -> list[dict[str, Any]]:
    mk = "kueue.x-k8s.io/v1beta2"
    return [
        namespace(), flavor("default-flavor", None), flavor("a100", A100), flavor("h100", H100),
        flavor("a100-mig", A100_40),
        {"apiVersion": mk, "kind": "MultiKueueCluster", "metadata": {"name": "worker-main"},
         "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": secret}}}},
        {"apiVersion": mk, "kind": "MultiKueueConfig", "metadata": {"name": "mk-config"},
         "spec": {"clusters": ["worker-main"]}},
        {"apiVersion": mk, "kind": "AdmissionCheck", "metadata": {"name": "mk-check"},
         "spec": {"controllerName": "kueue.x-k8s.io/multikueue",
                  "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig",
                                 "name": "mk-config"}}},
        cluster_queue("mk-cq", checks=("mk-check",)), local_queue("default", "mk-cq")]


def delete_jobs(api: client.ApiClient, namespace_name: str = NAMESPACE,
                timeout_s: float = 90) -> None:
    """Every batch Job and vcjob of the namespace gone, with its pods and Kueue Workloads
    (test teardown)."""
    batch, core, custom = client.BatchV1Api(api), client.CoreV1Api(api), client.CustomObjectsApi(api)
    batch.delete_collection_namespaced_job(namespace_name, propagation_policy="Foreground")
    try:
        custom.delete_collection_namespaced_custom_object(
            "batch.volcano.sh", "v1alpha1", namespace_name, "jobs")
    except ApiException as exc:
        if exc.status != 404:  # no Volcano on this cluster
            raise

    def workloads() -> list[Any]:
        # Kueue releases a ClusterQueue's reservation when the Workload goes (after its Job):
        # a test reading the quota's use must not see the previous test's job in it.
        try:
            return custom.list_namespaced_custom_object(
                "kueue.x-k8s.io", "v1beta2", namespace_name, "workloads")["items"]
        except ApiException as exc:
            if exc.status != 404:
                raise
            return []

    def gone() -> bool:
        return not (batch.list_namespaced_job(namespace_name).items
                    or core.list_namespaced_pod(namespace_name).items or workloads())

    wait_for(gone, timeout_s, what=f"jobs and pods of {namespace_name} gone")


def capture(name: str, obj: Any) -> None:
    """With K8S_CAPTURE_DIR set, keep a real object as test data (managedFields dropped:
    noise).  tests/broker/backends/kube/data/real/ holds the committed captures."""
    import json
    import os

    target = os.environ.get("K8S_CAPTURE_DIR")
    if not target:
        return
    if isinstance(obj, dict):
        obj = {**obj, "metadata": {k: v for k, v in (obj.get("metadata") or {}).items()
                                   if k != "managedFields"}}
    os.makedirs(target, exist_ok=True)
    with open(os.path.join(target, f"{name}.json"), "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=1, sort_keys=True)
        fh.write("\n")


def placement_of(pool: Any, spec: Any) -> tuple[str, list[str]]:
    """What the broker's placement makes of one reported pool for a gang now
    (``tests.broker.backends.placement_probe``; Kubernetes packs pods, several a node)."""
    from tests.broker.backends.placement_probe import placement_of as probe

    return probe(pool, spec)


HYPERNODES = ("topology.volcano.sh", "v1alpha1", "hypernodes")


def hypernode(name: str, tier: int, *members: dict[str, Any]) -> dict[str, Any]:
    """A Volcano HyperNode of ``tier`` holding ``members`` ({"type": Node|HyperNode, "selector": ...})."""
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "members": list(members)}}


def delete_hypernodes(api: client.ApiClient, *docs: dict[str, Any]) -> None:
    """Remove HyperNodes a test added, the widest first (gone already is fine): Volcano's
    scheduler places by every HyperNode it sees."""
    custom = client.CustomObjectsApi(api)
    for doc in reversed(docs):
        try:
            custom.delete_cluster_custom_object(*HYPERNODES, doc["metadata"]["name"])
        except ApiException as exc:
            if exc.status != 404:
                raise
