"""A gang that must share an interconnect domain, on real Volcano over kwok nodes: with racks
fragmented the whole gang waits (minAvailable: all workers or none), and starts in one rack once
that rack has room for every worker."""
from __future__ import annotations

import time

import pytest
from kubernetes import client

from broker.backends.kube import KubeConfig, VolcanoBackend

from . import cluster as c
from .conftest import settings
from .test_volcano_real import GANG_QUEUE, identity, spec

pytestmark = [pytest.mark.k8s, pytest.mark.volcano]
NODES = ("vrack-a-0", "vrack-a-1", "vrack-b-0")





def _l40s(name: str, rack: str) -> dict:
    return c.rack_node(name, rack, pool="volcano-topology", product=c.L40S, gpus=2, memory_mib=46068)


def test_a_volcano_gang_waits_whole_then_starts_in_one_rack(k8s_env, kueue_cluster, main_api):
    volcano_backend = VolcanoBackend("k8s-main", KubeConfig(kubeconfig=k8s_env["K8S_MAIN_KUBECONFIG"]),
                                     settings(interconnect_affinity=True))
    c.delete_nodes(main_api, *NODES)
    c.apply(main_api, _l40s("vrack-a-0", "rack-a"), _l40s("vrack-b-0", "rack-b"), c.volcano_queue(GANG_QUEUE))
    core = client.CoreV1Api(main_api)
    held = [n.metadata.name for n in core.list_node(label_selector="gpubroker.test/pool=volcano").items]
    try:
        # every other L40S node is unlabelled, so only the racks' nodes qualify: one per rack
        job_id = volcano_backend.submit(spec(workers=2, gpus_per_worker=2, command="sleep 30", same_interconnect=True),
                                        "wl-vrack", identity(GANG_QUEUE))

        def nodes() -> list[str]:
            return c.pods_nodes(main_api, job_id, "volcano.sh/job-name")
        c.wait_for(lambda: len(nodes()) == 2, 60, what="the gang's pods created")
        time.sleep(8)  # several of Volcano's scheduling cycles
        assert nodes() == ["", ""], held  # all or none: none, though each rack has room for one
        c.apply(main_api, _l40s("vrack-a-1", "rack-a"))
        both = c.wait_for(lambda: all(n := nodes()) and n, 60, what="both placed")
        assert both == ["vrack-a-0", "vrack-a-1"], both
    finally:
        c.delete_jobs(main_api)
        c.delete_nodes(main_api, *NODES)
