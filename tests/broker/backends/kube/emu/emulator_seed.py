"""Ready-made emulated clusters for tests and demos (all objects CRD-valid).

The standard cluster: two nodes with 4 x A100-80GB each, one MIG node
(7 x 1g.10gb under the "mixed" strategy), a Kueue ResourceFlavor per GPU kind,
ClusterQueue "gpu-cq" (8 GPUs, 7 MIG slices of nominal quota) behind
LocalQueue "default" in namespace "team", and an Open Volcano Queue "default".
"""
from __future__ import annotations

from typing import Any

from tests.broker.backends.kube.emu.emulator import KubeEmulator

A100 = "NVIDIA-A100-SXM4-80GB"
A100_40 = "NVIDIA-A100-SXM4-40GB"
NAMESPACE = "team"
KUEUE = "kueue.x-k8s.io"
KV = f"{KUEUE}/v1beta2"


def _flavor(name: str, product: str) -> dict[str, Any]:
    return {"apiVersion": KV, "kind": "ResourceFlavor", "metadata": {"name": name},
            "spec": {"nodeLabels": {"nvidia.com/gpu.product": product}}}


def cluster_queue(name: str = "gpu-cq", quota: int = 8, mig_quota: int = 7,
                  checks: tuple[str, ...] = (), stop: str = "None") -> dict[str, Any]:
    groups = [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
        {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": quota}]}]},
        {"coveredResources": ["nvidia.com/mig-1g.10gb"], "flavors": [
            {"name": "a100-mig", "resources": [{"name": "nvidia.com/mig-1g.10gb",
                                                "nominalQuota": mig_quota}]}]}]
    body: dict[str, Any] = {"apiVersion": KV, "kind": "ClusterQueue", "metadata": {"name": name},
                            "spec": {"namespaceSelector": {}, "resourceGroups": groups,
                                     "stopPolicy": stop}}
    if checks:
        body["spec"]["admissionChecksStrategy"] = {
            "admissionChecks": [{"name": c} for c in checks]}
    return body


def local_queue(name: str = "default", cq: str = "gpu-cq") -> dict[str, Any]:
    return {"apiVersion": KV, "kind": "LocalQueue", "metadata": {"name": name},
            "spec": {"clusterQueue": cq}}


def seed_nodes(emu: KubeEmulator) -> None:
    emu.add_node("gpu-a", product=A100, gpus=4)
    emu.add_node("gpu-b", product=A100, gpus=4)
    emu.add_node("mig-a", product=A100_40, gpus=0, memory_mib=40960, mig={"1g.10gb": 7})


def seed_kueue(emu: KubeEmulator, quota: int = 8, mig_quota: int = 7,
               checks: tuple[str, ...] = ()) -> None:
    emu.add(KUEUE, "resourceflavors", _flavor("a100", A100))
    emu.add(KUEUE, "resourceflavors", _flavor("a100-mig", A100_40))
    emu.add(KUEUE, "clusterqueues", cluster_queue(quota=quota, mig_quota=mig_quota,
                                                  checks=checks))
    emu.add(KUEUE, "localqueues", local_queue(), namespace=NAMESPACE)


def seed_volcano(emu: KubeEmulator, name: str = "default", state: str = "Open") -> None:
    emu.add("scheduling.volcano.sh", "queues", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": name}, "spec": {"weight": 1, "reclaimable": True},
        "status": {"state": state}})


def seed_multikueue(emu: KubeEmulator, configs: dict[str, list[str]],
                    inactive: tuple[str, ...] = ()) -> None:
    """A manager: AdmissionCheck "multikueue", MultiKueueConfigs and their clusters."""
    first = next(iter(configs))
    emu.add(KUEUE, "admissionchecks", {
        "apiVersion": KV, "kind": "AdmissionCheck", "metadata": {"name": "multikueue"},
        "spec": {"controllerName": "kueue.x-k8s.io/multikueue", "parameters": {
            "apiGroup": KUEUE, "kind": "MultiKueueConfig", "name": first}}})
    for name, clusters in configs.items():
        emu.add(KUEUE, "multikueueconfigs", {"apiVersion": KV, "kind": "MultiKueueConfig",
                                             "metadata": {"name": name},
                                             "spec": {"clusters": clusters}})
    for cluster in dict.fromkeys(c for cs in configs.values() for c in cs):
        active = "False" if cluster in inactive else "True"
        emu.add(KUEUE, "multikueueclusters", {
            "apiVersion": KV, "kind": "MultiKueueCluster", "metadata": {"name": cluster},
            "spec": {"clusterSource": {"kubeConfig": {"location": f"{cluster}-kubeconfig",
                                                      "locationType": "Secret"}}},
            "status": {"conditions": [{"type": "Active", "status": active,
                                       "reason": "Active" if active == "True" else "BadConfig",
                                       "message": "", "lastTransitionTime":
                                       "2026-01-01T00:00:00Z"}]}})


def standard_cluster(emu: KubeEmulator) -> KubeEmulator:
    """Nodes plus both Kueue and Volcano objects (a demo cluster)."""
    seed_nodes(emu)
    seed_kueue(emu)
    seed_volcano(emu)
    return emu
