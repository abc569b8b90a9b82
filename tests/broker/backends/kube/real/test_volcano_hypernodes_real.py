"""Volcano's HyperNodes read into each node's topology levels, on the real API server: two
racks (tier 1, one naming its nodes by pattern, one by exact name) under a spine (tier 2)."""
from __future__ import annotations

from typing import Iterator

import pytest
from kubernetes import client

from broker.backends.kube import KubeConfig, VolcanoBackend

from . import cluster as c
from .conftest import settings

pytestmark = [pytest.mark.k8s, pytest.mark.volcano]
NODES = ("hn-a-0", "hn-a-1", "hn-b-0")
HYPERNODES = (
    c.hypernode("hn-rack-a", 1, {"type": "Node", "selector": {"regexMatch": {"pattern": "^hn-a-"}}}),
    c.hypernode("hn-rack-b", 1, {"type": "Node", "selector": {"exactMatch": {"name": "hn-b-0"}}}),
    c.hypernode("hn-spine", 2, {"type": "HyperNode", "selector": {"exactMatch": {"name": "hn-rack-a"}}},
                {"type": "HyperNode", "selector": {"exactMatch": {"name": "hn-rack-b"}}}),
)


@pytest.fixture
def racks(main_api: client.ApiClient) -> Iterator[None]:
    c.delete_nodes(main_api, *NODES)
    c.apply(main_api, *(c.node(n, c.L40S, 2, memory_mib=46068, pool="hn-topology") for n in NODES), *HYPERNODES)
    yield
    c.delete_hypernodes(main_api, *HYPERNODES)
    c.delete_nodes(main_api, *NODES)


def test_the_volcano_inventory_places_each_node_under_its_rack_and_spine(k8s_env, kueue_cluster, racks):
    backend = VolcanoBackend("k8s-main", KubeConfig(kubeconfig=k8s_env["K8S_MAIN_KUBECONFIG"]), settings())
    try:
        nodes = {n.name: n for p in backend.inventory().pools for n in p.nodes if n.name in NODES}
    finally:
        backend.close()
    assert nodes["hn-a-1"].topology == (("tier 2", "hn-spine"), ("tier 1", "hn-rack-a")), nodes
    assert nodes["hn-b-0"].topology == (("tier 2", "hn-spine"), ("tier 1", "hn-rack-b")), nodes
