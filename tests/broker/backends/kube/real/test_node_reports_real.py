"""Nodes as the NVIDIA device plugin and an operator leave them, on the real kube-apiserver
(kwok: their labels, capacity and taints; there is no device plugin), read by the inventory:
a node whose plugin stopped offering some GPUs and that an operator tainted is named with both
reasons and counts none idle; a time-sliced node is a pool of shared replicas, which a job
asking for whole GPUs never matches."""
from __future__ import annotations

from typing import Iterator

import pytest

from broker.backends.kube import KubeConfig, KueueBackend

from . import cluster as c
from .conftest import settings

pytestmark = pytest.mark.k8s


@pytest.fixture
def read_node(k8s_env, main_api) -> Iterator:
    """read_node(doc) -> (pool, node): the node added, as a backend that sees only its pool reads it."""
    added: list[str] = []

    def _read(doc: dict):
        pool = doc["metadata"]["labels"]["gpubroker.test/pool"]
        backend = KueueBackend("k8s-main", KubeConfig(kubeconfig=k8s_env["K8S_MAIN_KUBECONFIG"]),
                               settings(node_selector=f"gpubroker.test/pool={pool}"))
        added.append(doc["metadata"]["name"])
        return c.add_node_and_read(main_api, backend, doc)

    yield _read
    c.delete_nodes(main_api, *added)


def test_a_node_with_gpus_gone_from_allocatable_is_named_with_its_reasons_and_not_idle(read_node):
    sick = c.node("sick-0", c.A100, 4, pool="health")
    sick["status"]["allocatable"] = {**sick["status"]["capacity"], "nvidia.com/gpu": "2"}
    # what an operator (or a health agent) sets on a node whose GPU reported Xid 79
    sick["spec"]["taints"] = [{"key": "gpubroker.test/gpu-health", "value": "xid-79", "effect": "NoSchedule"}]
    _, node = read_node(sick)
    assert (node.gpus_total, node.gpus_allocatable, node.gpus_free) == (4, 2, 0), node
    assert node.draining  # the NoSchedule taint keeps every pod off
    assert "taint gpubroker.test/gpu-health=xid-79:NoSchedule" in node.health_reason, node.health_reason
    assert "2 of 4 GPUs not allocatable" in node.health_reason, node.health_reason


def test_a_time_sliced_node_is_a_shared_pool_of_replicas(read_node):
    shared = c.node("shared-0", c.A100 + "-SHARED", 16, pool="sharing")  # 4 GPUs, 4 replicas each
    shared["metadata"]["labels"].update({"nvidia.com/gpu.count": "4", "nvidia.com/gpu.replicas": "4",
                                         "nvidia.com/gpu.sharing-strategy": "time-slicing"})
    pool, node = read_node(shared)
    assert pool.partitioning == "time-slicing" and node.partitioning == "time-slicing", pool
    assert node.gpus_total == 16 and pool.gpu_model == "A100-80GB"  # replicas; the -SHARED suffix dropped
