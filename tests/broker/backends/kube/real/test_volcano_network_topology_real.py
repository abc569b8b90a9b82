"""Volcano's own topology on real Volcano over kwok nodes: HyperNodes (two tier-1 racks under a
tier-2 spine) and a backend told that tier 1 is the interconnect domain
(``volcano_network_tier: 1``). With each rack holding one 2-GPU node, a 2 x 2-GPU gang without
the requirement spans both racks (the control); with it (``topology_level: rack``, which on
Volcano is tier 1), the vcjob carries ``networkTopology`` hard at tier 1, the broker's
placement finds no rack for it (and says so), Volcano holds the whole gang, and once rack a
gains a node both workers start there. Only preferring the rack (soft), the gang starts at
once, spread."""
from __future__ import annotations

import time
from typing import Any, Iterator

import pytest
from kubernetes import client

from broker.backends.kube import BackendSettings, KubeConfig, VolcanoBackend

from tests.broker.backends.placement_probe import placement_among

from . import cluster as c
from .conftest import MODEL_NAMES
from .test_volcano_real import GANG_QUEUE, identity, spec

pytestmark = [pytest.mark.k8s, pytest.mark.volcano]
B200 = "NVIDIA-B200"  # a product no other test's node has: only the racks' nodes qualify
POOL = "nt-topology"
NODES = ("nt-a-0", "nt-a-1", "nt-b-0")
HYPERNODES = (
    c.hypernode("nt-rack-a", 1, {"type": "Node", "selector": {"regexMatch": {"pattern": "^nt-a-"}}}),
    c.hypernode("nt-rack-b", 1, {"type": "Node", "selector": {"exactMatch": {"name": "nt-b-0"}}}),
    c.hypernode("nt-spine", 2, {"type": "HyperNode", "selector": {"regexMatch": {"pattern": "^nt-rack-"}}}),
)


def _node(name: str) -> dict[str, Any]:
    return c.node(name, B200, 2, pool=POOL)


@pytest.fixture
def racks(main_api: client.ApiClient) -> Iterator[None]:
    c.delete_nodes(main_api, *NODES)
    c.apply(main_api, _node("nt-a-0"), _node("nt-b-0"), *HYPERNODES, c.volcano_queue(GANG_QUEUE))
    c.wait_for(lambda: c.ready_nodes(main_api, POOL) == 2, 60, what="the racks' nodes Ready")
    yield
    c.delete_jobs(main_api)
    c.delete_hypernodes(main_api, *HYPERNODES)
    c.delete_nodes(main_api, *NODES)


def _backend(k8s_env) -> VolcanoBackend:
    settings = BackendSettings(default_namespace=c.NAMESPACE, model_names={**MODEL_NAMES, B200: "B200"},
                               volcano_network_tier=1)
    return VolcanoBackend("k8s-main", KubeConfig(kubeconfig=k8s_env["K8S_MAIN_KUBECONFIG"]), settings)


def _gang(same: bool, mode: str = "required"):
    """The gang, asking to share a rack (the spec's generic level, tier 1 here) or not."""
    level = {"topology_level": "rack", "topology_mode": mode} if same else {}
    return spec(workers=2, gpus_per_worker=2, gpu_models=("B200",), command="sleep 60", **level)


def _placement(backend: VolcanoBackend, same: bool) -> tuple[str, list[str]]:
    [pool] = [p for p in backend.inventory().pools if p.gpu_model == "B200"]
    return c.placement_of(pool, _gang(same))


def test_a_gang_held_to_one_hypernode_waits_whole_then_starts_in_one_rack(k8s_env, kueue_cluster, main_api, racks):
    backend = _backend(k8s_env)
    try:
        domains = {n.name: n.interconnect_domain for p in backend.inventory().pools for n in p.nodes if n.name in NODES}
        assert domains == {"nt-a-0": "nt-rack-a", "nt-b-0": "nt-rack-b"}, domains

        # the control: without the requirement the gang takes one node in each rack
        loose = backend.submit(_gang(False), "wl-nt-loose", identity(GANG_QUEUE))
        both = c.wait_for(lambda: all(n := c.pods_nodes(main_api, loose, "volcano.sh/job-name")) and n, 60,
                          what="the control's workers placed")
        assert both == ["nt-a-0", "nt-b-0"], both
        c.delete_jobs(main_api)

        # preferred: soft at tier 1, and with no rack to hold it Volcano starts it spread at once
        soft = backend.submit(_gang(True, "preferred"), "wl-nt-soft", identity(GANG_QUEUE))
        namespace, name = soft.split("/")
        body = client.CustomObjectsApi(main_api).get_namespaced_custom_object(
            "batch.volcano.sh", "v1alpha1", namespace, "jobs", name)
        assert body["spec"]["networkTopology"] == {"mode": "soft", "highestTierAllowed": 1}, body["spec"]
        spread = c.wait_for(lambda: all(n := c.pods_nodes(main_api, soft, "volcano.sh/job-name")) and n, 60,
                            what="the preferring gang's workers placed")
        assert spread == ["nt-a-0", "nt-b-0"], spread
        c.delete_jobs(main_api)

        reason, _ = _placement(backend, same=True)
        # each rack one 2-GPU node: no rack holds the gang even idle, as these nodes stand
        never = ("never_fits: pool NVIDIA-B200 can never hold 2 x 2 GPUs in one rack (tier 1) "
                 "(at most 1 workers even when idle)")
        assert reason == never, reason
        job_id = backend.submit(_gang(True), "wl-nt", identity(GANG_QUEUE))
        namespace, name = job_id.split("/")
        body = client.CustomObjectsApi(main_api).get_namespaced_custom_object(
            "batch.volcano.sh", "v1alpha1", namespace, "jobs", name)
        assert body["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}, body["spec"]

        def nodes() -> list[str]:
            return c.pods_nodes(main_api, job_id, "volcano.sh/job-name")
        c.wait_for(lambda: len(nodes()) == 2, 60, what="the gang's pods created")
        time.sleep(8)  # several of Volcano's scheduling cycles, each rack with room for one worker
        assert nodes() == ["", ""], nodes()

        c.apply(main_api, _node("nt-a-1"))
        c.wait_for(lambda: c.ready_nodes(main_api, POOL) == 3, 60, what="rack a's second node Ready")
        placed = c.wait_for(lambda: all(n := nodes()) and n, 90, what="the gang placed in one rack")
        assert placed == ["nt-a-0", "nt-a-1"], placed
        # the broker's placement on the same three nodes, idle again: Volcano may start the gang
        # before an inventory read taken between the node's arrival and the start
        c.delete_jobs(main_api)
        assert _placement(backend, same=True) == ("", ["nt-a-0", "nt-a-1"])
        # and between clusters: the racks' pool and another reported pool outside every
        # HyperNode, each taken as a cluster: placement picks the one with a rack for the gang
        pools = backend.inventory().pools
        [racks] = [p for p in pools if p.gpu_model == "B200"]
        [plain] = [p for p in pools if p.partitioning == "whole" and p.gpu_model != "B200"][:1]
        chosen, left_out = placement_among({"racks": racks, "plain": plain}, _gang(True))
        assert chosen == "racks", left_out
        assert left_out["plain"].startswith(f"never_fits: pool {plain.name}: the cluster describes no rack level")
    finally:
        backend.close()
