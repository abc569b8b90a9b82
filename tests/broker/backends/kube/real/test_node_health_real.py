"""A node whose device plugin stopped offering some GPUs (allocatable below capacity) and that
an operator tainted, on the real kube-apiserver: the inventory names both, in Kubernetes'
words, and counts none of its GPUs idle."""
from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from broker.backends.kube import KubeConfig, KueueBackend

from . import cluster as c
from .conftest import settings

pytestmark = pytest.mark.k8s
NAME = "sick-0"


def _sick_node() -> dict:
    node = c.node(NAME, c.A100, 4, pool="health")
    node["status"]["allocatable"] = {**node["status"]["capacity"], "nvidia.com/gpu": "2"}
    # what an operator (or a health agent) sets on a node whose GPU reported Xid 79
    node["spec"]["taints"] = [{"key": "gpubroker.test/gpu-health", "value": "xid-79", "effect": "NoSchedule"}]
    return node


def _delete(api: client.ApiClient) -> None:
    try:
        client.CoreV1Api(api).delete_node(NAME)
    except ApiException as exc:
        if exc.status != 404:
            raise


def test_a_node_with_gpus_gone_from_allocatable_is_named_with_its_reasons_and_not_idle(k8s_env, main_api):
    backend = KueueBackend("k8s-main", KubeConfig(kubeconfig=k8s_env["K8S_MAIN_KUBECONFIG"]),
                           settings(node_selector="gpubroker.test/pool=health"))
    _delete(main_api)
    c.apply(main_api, _sick_node())
    try:
        def reported():
            nodes = [n for p in backend.inventory().pools for n in p.nodes if n.name == NAME]
            return nodes and nodes[0]
        node = c.wait_for(reported, 60, what=f"{NAME} in the inventory")
        assert (node.gpus_total, node.gpus_allocatable, node.gpus_free) == (4, 2, 0), node
        assert node.draining  # the NoSchedule taint keeps every pod off
        assert "taint gpubroker.test/gpu-health=xid-79:NoSchedule" in node.health_reason, node.health_reason
        assert "2 of 4 GPUs not allocatable" in node.health_reason, node.health_reason
    finally:
        _delete(main_api)
