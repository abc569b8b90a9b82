"""A gang that must share an interconnect domain, on real Kueue and the real kube-scheduler
over kwok nodes: its workers wait for room in one domain rather than span two, and start
there once it has room; the same gang without the requirement spreads at once."""
from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from broker.backends.base import JobState

from broker.backends.kube import KubeConfig, KueueBackend

from . import cluster as c
from .conftest import IDENTITY, settings
from .test_kueue_real import spec, wait_state

pytestmark = pytest.mark.k8s


@pytest.fixture
def racked(k8s_env, kueue_cluster) -> KueueBackend:
    """The Kueue backend of a site whose GPU nodes all carry the interconnect label."""
    return KueueBackend("k8s-main", KubeConfig(kubeconfig=k8s_env["K8S_MAIN_KUBECONFIG"]),
                        settings(interconnect_affinity=True))





def test_a_gang_waits_for_room_in_one_domain_then_starts_there(racked, main_api):
    c.delete_nodes(main_api, "rack-a-0", "rack-a-1", "rack-b-0")
    # racks fragmented: one 4-GPU node in rack a, one in rack b, besides the unlabelled a100-0/1
    c.apply(main_api, *(c.rack_node(f"{r}-0", r, pool="topology") for r in ("rack-a", "rack-b")))
    try:
        gang = racked.submit(spec(gpus_per_worker=4, workers=2, command="sleep 30", same_interconnect=True),
                                    "wl-rack", IDENTITY)
        # one worker starts in a rack (only labelled nodes qualify), the other cannot join it
        placed = c.wait_for(lambda: (n := c.pods_nodes(main_api, gang)) and len([x for x in n if x]) == 1 and n,
                            60, what="one worker placed, one waiting")
        first = next(x for x in placed if x)
        assert first in ("rack-a-0", "rack-b-0"), placed
        # room in the first worker's rack: the second joins it there
        rack = "rack-a" if first == "rack-a-0" else "rack-b"
        c.apply(main_api, c.rack_node(f"{rack}-1", rack, pool="topology"))
        both = c.wait_for(lambda: (n := c.pods_nodes(main_api, gang)) and all(n) and len(n) == 2 and n,
                          60, what="both workers placed")
        assert both == sorted([first, f"{rack}-1"]), both
        wait_state(racked, gang, JobState.RUNNING, JobState.COMPLETED)
        racked.cancel(gang)
    finally:
        c.delete_jobs(main_api)
        c.delete_nodes(main_api, "rack-a-0", "rack-a-1", "rack-b-0", "rack-b-1")


def _blocker(node: str) -> dict:
    """A pod outside Kueue (no queue name) holding a node's 4 GPUs."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"blocker-{node}", "namespace": c.NAMESPACE},
            "spec": {"nodeName": node, "restartPolicy": "Never", "containers": [
                {"name": "hold", "image": "busybox", "command": ["sleep", "600"],
                 "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}


def test_without_the_requirement_the_same_gang_spans_domains_at_once(racked, main_api):
    c.delete_nodes(main_api, "rack-a-0", "rack-b-0")
    c.apply(main_api, *(c.rack_node(f"{r}-0", r, pool="topology") for r in ("rack-a", "rack-b")))
    core = client.CoreV1Api(main_api)
    try:
        # the control: a100-0 and a100-1 held by pods outside Kueue, so only the racks have room
        for node in ("a100-0", "a100-1"):
            core.create_namespaced_pod(c.NAMESPACE, _blocker(node))
        loose = racked.submit(spec(gpus_per_worker=4, workers=2, command="sleep 30"), "wl-loose", IDENTITY)
        nodes = c.wait_for(lambda: (n := c.pods_nodes(main_api, loose)) and all(n) and len(n) == 2 and n, 60,
                           what="both workers placed")
        assert nodes == ["rack-a-0", "rack-b-0"], nodes  # one in each rack, at once
    finally:
        for node in ("a100-0", "a100-1"):
            try:
                core.delete_namespaced_pod(f"blocker-{node}", c.NAMESPACE, grace_period_seconds=0)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        c.wait_for(lambda: not [p for p in core.list_namespaced_pod(c.NAMESPACE).items
                                if p.metadata.name.startswith("blocker-")], 60, what="the blockers gone")
        c.delete_jobs(main_api)
        c.delete_nodes(main_api, "rack-a-0", "rack-b-0")
