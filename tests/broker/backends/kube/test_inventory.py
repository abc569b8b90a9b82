"""Node -> NodeInventory parsing and pool grouping (pure functions, no server)."""
from __future__ import annotations

from broker.backends.kube.settings import BackendSettings
from broker.backends.kube.inventory import (
    allocated_by_node, build_pools, flavor_namer, node_entries, product_namer)

SETTINGS = BackendSettings()


def node(name: str, labels: dict, capacity: dict, ready: str | None = "True", **spec) -> dict:
    conditions = [] if ready is None else [{"type": "Ready", "status": ready}]
    return {"metadata": {"name": name, "labels": labels}, "spec": spec,
            "status": {"capacity": capacity, "allocatable": dict(capacity),
                       "conditions": conditions}}


def test_whole_gpus_memory_count_and_interconnect():
    n = node("a", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                   "nvidia.com/gpu.memory": "81559", "nvidia.com/gpu.count": "8",
                   "nvidia.com/gpu.clique": "nvl-1"}, {"nvidia.com/gpu": "7", "cpu": "64"})
    [entry] = node_entries(n, {("a", "nvidia.com/gpu"): 2}, SETTINGS, "kueue")
    assert entry.gpus_total == 8 and entry.gpus_allocatable == 7 and entry.gpus_allocated == 2
    assert entry.gpu_memory_gb == 80 and entry.interconnect_domain == "nvl-1"
    assert entry.partitioning == "whole" and entry.gpus_free == 5


def test_mig_single_strategy_reads_the_profile_from_the_product():
    n = node("m", {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
                   "nvidia.com/mig.strategy": "single"}, {"nvidia.com/gpu": "28"})
    [entry] = node_entries(n, {}, SETTINGS, "kueue")
    assert entry.partitioning == "1g.5gb" and entry.gpu_memory_gb == 5
    assert entry.gpu_model == "NVIDIA-A100-SXM4-40GB" and entry.gpus_total == 28


def test_mig_mixed_strategy_splits_the_node():
    n = node("x", {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                   "nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.memory": "81920"},
             {"nvidia.com/gpu": "4", "nvidia.com/mig-3g.40gb": "4", "nvidia.com/mig-1g.10gb": "7"})
    parts = {e.partitioning: e for e in node_entries(n, {}, SETTINGS, "volcano")}
    assert set(parts) == {"whole", "3g.40gb", "1g.10gb"}
    assert parts["3g.40gb"].gpu_memory_gb == 40 and parts["whole"].gpu_memory_gb == 80


def test_health_and_draining():
    labels = {"nvidia.com/gpu.product": "P"}
    assert not node_entries(node("a", labels, {"nvidia.com/gpu": "1"}, ready=None),
                            {}, SETTINGS, "k")[0].healthy
    cordoned = node("b", labels, {"nvidia.com/gpu": "1"}, taints=[
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}])
    assert node_entries(cordoned, {}, SETTINGS, "k")[0].draining
    prefer = node("c", labels, {"nvidia.com/gpu": "1"}, taints=[
        {"key": "x", "effect": "PreferNoSchedule"}])
    assert not node_entries(prefer, {}, SETTINGS, "k")[0].draining
    assert node_entries(node("d", labels, {"cpu": "8"}), {}, SETTINGS, "k") == []


def test_allocation_ignores_finished_and_unbound_pods():
    def pod(node_name, phase, gpus):
        return {"spec": {"nodeName": node_name, "containers": [
            {"resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}, "status": {"phase": phase}}
    alloc = allocated_by_node([pod("a", "Running", 2), pod("a", "Succeeded", 4),
                               pod("a", "Pending", 1)])
    assert alloc[("a", "nvidia.com/gpu")] == 3


def test_pool_names_from_flavors_and_products():
    a = node("a", {"nvidia.com/gpu.product": "A", "pool": "x"}, {"nvidia.com/gpu": "2"})
    b = node("b", {"nvidia.com/gpu.product": "B", "pool": "x"}, {"nvidia.com/gpu": "2"})
    flavors = [{"metadata": {"name": "xpool"}, "spec": {"nodeLabels": {"pool": "x"}}}]
    pools = build_pools([a, b], [], SETTINGS, "kueue", flavor_namer(flavors))
    assert sorted(p.name for p in pools) == ["xpool/A", "xpool/B"]  # one model per pool
    assert sorted(p.name for p in build_pools([a], [], SETTINGS, "volcano", product_namer)) == ["A"]


def test_each_reason_a_node_takes_no_work_is_given_in_kubernetes_words():
    labels = {"nvidia.com/gpu.product": "P"}
    gpus = {"nvidia.com/gpu": "8"}
    fine = node("ok", labels, gpus)
    assert node_entries(fine, {}, SETTINGS, "k")[0].health_reason == ""
    down = node("down", labels, gpus, ready="False")
    down["status"]["conditions"][0].update(reason="KubeletNotReady", message="PLEG is not healthy")
    assert node_entries(down, {}, SETTINGS, "k")[0].health_reason == "not Ready (KubeletNotReady: PLEG is not healthy)"
    cordoned = node("c", labels, gpus, unschedulable=True, taints=[
        {"key": "nvidia.com/gpu.health", "value": "xid-79", "effect": "NoSchedule"}])
    assert node_entries(cordoned, {}, SETTINGS, "k")[0].health_reason == (
        "cordoned; taint nvidia.com/gpu.health=xid-79:NoSchedule")
    assert node_entries(node("never", labels, gpus, ready=None), {}, SETTINGS, "k")[0].health_reason == (
        "never reported Ready")


def test_gpus_the_device_plugin_stopped_offering_are_named_and_not_idle():
    sick = node("s", {"nvidia.com/gpu.product": "P"}, {"nvidia.com/gpu": "8"})
    sick["status"]["allocatable"]["nvidia.com/gpu"] = "6"  # two GPUs the plugin found unhealthy
    [entry] = node_entries(sick, {("s", "nvidia.com/gpu"): 1}, SETTINGS, "kueue")
    assert entry.health_reason == "2 of 8 GPUs not allocatable"
    assert entry.healthy and entry.gpus_free == 5  # 6 allocatable - 1 allocated; the 2 are not idle


def test_time_sliced_gpus_are_a_shared_pool_of_replicas_not_whole_gpus():
    # the device plugin's time-slicing: 4 GPUs advertised as 16 replicas, product renamed -SHARED
    n = node("ts", {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-SHARED", "nvidia.com/gpu.memory": "81920",
                    "nvidia.com/gpu.count": "4", "nvidia.com/gpu.replicas": "4",
                    "nvidia.com/gpu.sharing-strategy": "time-slicing"}, {"nvidia.com/gpu": "16"})
    [entry] = node_entries(n, {("ts", "nvidia.com/gpu"): 3}, SETTINGS, "kueue")
    assert (entry.partitioning, entry.gpu_model, entry.gpu_memory_gb) == ("time-slicing", "NVIDIA-A100-SXM4-80GB", 80)
    assert (entry.gpus_total, entry.gpus_allocated) == (16, 3)  # replicas, not the 4 GPUs' count label


def test_renamed_shared_resource_and_mps_are_shared_pools_too():
    labels = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559",
              "nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/gpu.replicas": "2"}
    [entry] = node_entries(node("mps", labels, {"nvidia.com/gpu.shared": "16"}), {}, SETTINGS, "kueue")
    assert (entry.partitioning, entry.gpus_total, entry.gpu_model) == ("mps", 16, "NVIDIA-H100-80GB-HBM3")
    plain = node("p", {"nvidia.com/gpu.product": "P", "nvidia.com/gpu.sharing-strategy": "none"}, {"nvidia.com/gpu": "8"})
    assert node_entries(plain, {}, SETTINGS, "kueue")[0].partitioning == "whole"
