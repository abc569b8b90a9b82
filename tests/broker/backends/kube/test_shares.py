"""GPU shares on Kubernetes: a job of shares asks nvidia.com/gpu on a node the device plugin
labels shared (time-slicing, MPS), and its usage is charged its replicas' part of a GPU, as
the shared nodes' nvidia.com/gpu.replicas label says; a whole-GPU job is charged its GPUs."""
from __future__ import annotations

from datetime import datetime, timezone

from broker.backends.json_fields import Fields
from broker.backends.kube.common import worker_pod_spec
from broker.backends.kube.settings import BackendSettings
from broker.backends.kube.shares import ReplicaRatios, asks_shares

from .conftest import make_spec

EPOCH = datetime(2000, 1, 1, tzinfo=timezone.utc)
SHARED = {"nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.replicas": "4"}


def test_a_job_of_shares_runs_on_a_shared_node_and_is_charged_its_share(harness):
    harness.emu.add_node("shared-a", gpus=16, labels=SHARED)  # 4 GPUs x 4 replicas
    job_id = harness.submit("wl-share", gpus_per_worker=2, gpu_share=True)
    harness.step()
    running = harness.backend.status([job_id])[job_id]
    assert running.nodes == ("shared-a",), running
    harness.emu.advance(1800)
    harness.finish(job_id)
    [record] = list(harness.backend.usage(EPOCH))
    assert record.gpus == 2 and record.gpu_seconds == 2 * 1800 // 4  # half a GPU, not two GPUs


def test_only_the_job_of_shares_asks_for_a_shared_node():
    settings = BackendSettings()
    shared = Fields(worker_pod_spec(make_spec(gpu_share=True), "wl-1", settings))
    whole = Fields(worker_pod_spec(make_spec(), "wl-2", settings))
    assert asks_shares(shared) and not asks_shares(whole)


def test_the_fewest_replicas_of_the_shared_nodes_are_taken_and_listed_once():
    calls = []

    def nodes():
        calls.append(1)
        return [{"metadata": {"labels": {**SHARED, "nvidia.com/gpu.replicas": r}}} for r in ("8", "4")] + [
            {"metadata": {"labels": {"nvidia.com/gpu.replicas": "2"}}}  # not shared: not counted
        ]

    ratios = ReplicaRatios(nodes)
    assert (ratios(), ratios(), len(calls)) == (4, 4, 1)
    assert ReplicaRatios(list)() == 1
