"""A time-sliced GPU node as the NVIDIA device plugin advertises it (kwok: its labels and
capacity, there is no device plugin), on the real kube-apiserver: the inventory makes it a
pool of shared replicas, which a job asking for whole GPUs never matches."""
from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from broker.backends.kube import KubeConfig, KueueBackend

from . import cluster as c
from .conftest import settings

pytestmark = pytest.mark.k8s
NAME = "shared-0"


def _time_sliced_node() -> dict:
    node = c.node(NAME, c.A100 + "-SHARED", 16, pool="sharing")  # 4 GPUs, 4 replicas each
    node["metadata"]["labels"].update({"nvidia.com/gpu.count": "4", "nvidia.com/gpu.replicas": "4",
                                       "nvidia.com/gpu.sharing-strategy": "time-slicing"})
    return node


def _delete(api: client.ApiClient) -> None:
    try:
        client.CoreV1Api(api).delete_node(NAME)
    except ApiException as exc:
        if exc.status != 404:
            raise


def test_a_time_sliced_node_is_a_shared_pool_of_replicas(k8s_env, main_api):
    backend = KueueBackend("k8s-main", KubeConfig(kubeconfig=k8s_env["K8S_MAIN_KUBECONFIG"]),
                           settings(node_selector="gpubroker.test/pool=sharing"))
    _delete(main_api)
    c.apply(main_api, _time_sliced_node())
    try:
        def reported():
            pools = [p for p in backend.inventory().pools if any(n.name == NAME for n in p.nodes)]
            return pools and pools[0]
        pool = c.wait_for(reported, 60, what=f"{NAME} in the inventory")
        node = next(n for n in pool.nodes if n.name == NAME)
        assert pool.partitioning == "time-slicing" and node.partitioning == "time-slicing", pool
        assert node.gpus_total == 16 and pool.gpu_model == "A100-80GB"  # replicas; the -SHARED suffix dropped
    finally:
        _delete(main_api)
