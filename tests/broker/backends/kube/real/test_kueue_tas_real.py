"""Kueue's Topology-Aware Scheduling on real Kueue over kwok nodes (a ``Topology`` whose levels
are the interconnect label and the host, a flavor that names it): a gang that requires that
level (``topology_level``), from a backend with ``kueue_topology`` on, asks Kueue for it, so
Kueue admits it only once one rack has room for every worker, and assigns it there; one that
only prefers it is admitted at once, spread over the racks."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from broker.backends.base import JobState, PoolInventory, ProjectIdentity
from broker.backends.kube import KubeConfig, KueueBackend

from tests.broker.backends.placement_probe import placement_among

from . import cluster as c
from .conftest import settings
from .test_kueue_real import spec, wait_state, workload_of_job

pytestmark = pytest.mark.k8s
LEVEL = "nvidia.com/gpu.clique"  # BackendSettings.interconnect_label's default
POOL = "tas"
NODES = ("tas-a-0", "tas-a-1", "tas-b-0")
IDENTITY = ProjectIdentity(tenant="acme", project="proj", k8s_namespace=c.NAMESPACE, queue="tas-lq")


def _tas_objects() -> list[dict[str, Any]]:
    topology = {"apiVersion": c.KV, "kind": "Topology", "metadata": {"name": "rack-topology"},
                "spec": {"levels": [{"nodeLabel": LEVEL}, {"nodeLabel": "kubernetes.io/hostname"}]}}
    flavor = {"apiVersion": c.KV, "kind": "ResourceFlavor", "metadata": {"name": "tas-a100"},
              "spec": {"nodeLabels": {"gpubroker.test/pool": POOL}, "topologyName": "rack-topology"}}
    queue = {"apiVersion": c.KV, "kind": "ClusterQueue", "metadata": {"name": "tas-cq"},
             "spec": {"namespaceSelector": {}, "resourceGroups": [{
                 "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                 "flavors": [{"name": "tas-a100", "resources": [
                     {"name": "cpu", "nominalQuota": 1000}, {"name": "memory", "nominalQuota": "8Ti"},
                     {"name": "nvidia.com/gpu", "nominalQuota": 16}]}]}]}}
    return [topology, flavor, queue, c.local_queue("tas-lq", "tas-cq")]




def test_kueue_admits_the_gang_only_when_one_rack_has_room_and_places_it_there(k8s_env, kueue_cluster, main_api):
    backend = KueueBackend("k8s-main", KubeConfig(kubeconfig=k8s_env["K8S_MAIN_KUBECONFIG"]),
                           settings(kueue_topology=True))
    c.delete_nodes(main_api, *NODES)
    c.apply(main_api, *_tas_objects(), *(c.rack_node(f"tas-{r}-0", f"rack-{r}", pool=POOL) for r in "ab"))
    try:
        c.wait_for(lambda: c.ready_nodes(main_api, POOL) == 2, 60, what="the racks' nodes Ready")
        # the inventory reads each node's place in the Topology its flavor names
        pool = _tas_pool(backend)
        nodes = {n.name: n for n in pool.nodes}
        assert nodes["tas-b-0"].topology == ((LEVEL, "rack-b"), ("kubernetes.io/hostname", "tas-b-0")), nodes

        # the control: without the requirement the gang takes one node in each rack
        loose = backend.submit(spec(gpus_per_worker=4, workers=2, command="sleep 30"), "wl-tas-loose", IDENTITY)
        both = c.wait_for(lambda: all(n := c.pods_nodes(main_api, loose)) and n, 60, what="the control placed")
        assert both == ["tas-a-0", "tas-b-0"], both
        c.delete_jobs(main_api)

        # preferred, where no rack holds the gang: Kueue admits it all the same, spread
        soft = spec(gpus_per_worker=4, workers=2, command="sleep 30", topology_level=LEVEL, topology_mode="preferred")
        assert c.placement_of(pool, soft) == ("", ["tas-a-0", "tas-b-0"])
        soft_id = backend.submit(soft, "wl-tas-soft", IDENTITY)
        wl = c.wait_for(lambda: workload_of_job(main_api, soft_id), 30, what="the preferring Workload")
        assert wl["spec"]["podSets"][0]["topologyRequest"]["preferred"] == LEVEL, wl["spec"]["podSets"][0]
        spread = c.wait_for(lambda: all(n := c.pods_nodes(main_api, soft_id)) and n, 60, what="the preferring gang")
        assert spread == ["tas-a-0", "tas-b-0"], spread
        c.delete_jobs(main_api)

        # required, by the cluster's own name for the level (the backend reads it in the Topology)
        gang = spec(gpus_per_worker=4, workers=2, command="sleep 30", topology_level=LEVEL)
        reason, _ = c.placement_of(pool, gang)
        # each rack a 4-GPU node: no rack holds the gang even idle, as these nodes stand
        never = (f"never_fits: pool {pool.name} can never hold 2 x 4 GPUs in one {LEVEL} "
                 "(at most 1 workers even when idle)")
        assert reason == never, reason
        job_id = backend.submit(gang, "wl-tas", IDENTITY)
        wl = c.wait_for(lambda: workload_of_job(main_api, job_id), 30, what="the Workload")
        assert wl["spec"]["podSets"][0]["topologyRequest"]["required"] == LEVEL, wl["spec"]["podSets"][0]
        pending = wait_state(backend, job_id, JobState.PENDING)
        assert c.pods_nodes(main_api, job_id) in ([], ["", ""]), "admitted though no rack has room"
        c.apply(main_api, c.rack_node("tas-a-1", "rack-a", pool=POOL))
        c.wait_for(lambda: c.ready_nodes(main_api, POOL) == 3, 60, what="rack a's second node Ready")
        running = wait_state(backend, job_id, JobState.RUNNING, JobState.COMPLETED)
        assert sorted(running.nodes) == ["tas-a-0", "tas-a-1"], (running, pending)
        # the broker's placement on the same three nodes, idle again: Kueue may admit the gang
        # before an inventory read taken between the node's arrival and the admission
        c.delete_jobs(main_api)
        tas_pool = _tas_pool(backend)
        assert c.placement_of(tas_pool, gang) == ("", ["tas-a-0", "tas-a-1"])
        # and between clusters: the racks' pool and another reported pool, whose flavor names
        # no Topology, each taken as a cluster: placement picks the one where the level fits
        [plain] = [p for p in backend.inventory().pools
                   if p.partitioning == "whole" and not any(n.name in NODES for n in p.nodes)][:1]
        chosen, left_out = placement_among({"racks": tas_pool, "plain": plain}, gang)
        assert chosen == "racks", left_out
        assert left_out["plain"].startswith(f"never_fits: pool {plain.name}: the cluster describes no {LEVEL} level")
    finally:
        c.delete_jobs(main_api)
        c.delete_nodes(main_api, *NODES)
        _delete_tas_objects(main_api)  # other tests read every ClusterQueue's limits


def _tas_pool(backend: KueueBackend) -> PoolInventory:
    """The reported pool of the racks' nodes, with those nodes only."""
    [pool] = [p for p in backend.inventory().pools if any(n.name in NODES for n in p.nodes)]
    return replace(pool, nodes=tuple(n for n in pool.nodes if n.name in NODES))


def _delete_tas_objects(api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(api)
    group = ("kueue.x-k8s.io", "v1beta2")
    for doc in reversed(_tas_objects()):
        plural, meta = doc["kind"].lower() + "s", doc["metadata"]
        try:
            if "namespace" in meta:
                custom.delete_namespaced_custom_object(*group, meta["namespace"], plural, meta["name"])
            else:
                custom.delete_cluster_custom_object(*group, plural, meta["name"])
        except ApiException as exc:
            if exc.status != 404:
                raise

    def gone() -> bool:
        queues = custom.list_cluster_custom_object(*group, "clusterqueues")["items"]
        return not [q for q in queues if q["metadata"]["name"] == "tas-cq"]
    c.wait_for(gone, 60, what="tas-cq gone")
