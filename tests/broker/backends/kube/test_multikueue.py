"""MultiKueue: which worker took the job, and worker capacity counted exactly once."""
from __future__ import annotations

from typing import Iterator

import pytest

from broker.backends.base import JobState, ProjectIdentity, Reason
from broker.backends.kube import KubeConfig, MultiKueueBackend
from tests.broker.backends.kube.emu.emulator import KubeEmulator
from tests.broker.backends.kube.emu.emulator_seed import (
    A100, NAMESPACE, seed_kueue, seed_multikueue)


@pytest.fixture
def workers() -> Iterator[dict[str, KubeEmulator]]:
    w1, w2 = KubeEmulator().start(), KubeEmulator().start()
    w1.add_node("node-1", product=A100, gpus=4)
    w1.add_node("node-2", product=A100, gpus=4)
    w2.add_node("node-1", product=A100, gpus=8)  # same node name, other cluster
    yield {"worker1": w1, "worker2": w2}
    w1.stop()
    w2.stop()


@pytest.fixture
def manager(emu: KubeEmulator) -> KubeEmulator:
    emu.add_node("manager-gpu", product=A100, gpus=8)  # the manager's own: never counted
    seed_kueue(emu, quota=16, checks=("multikueue",))
    seed_multikueue(emu, {"mk": ["worker1", "worker2"], "mk-extra": ["worker1", "worker3"]})
    return emu


def _config(emu: KubeEmulator) -> KubeConfig:
    return KubeConfig(host=emu.url, connect_timeout_s=0.5, read_timeout_s=0.5)


@pytest.fixture
def backend(manager, workers) -> Iterator[MultiKueueBackend]:
    b = MultiKueueBackend("fleet-mk", _config(manager),
                          workers={name: _config(w) for name, w in workers.items()})
    yield b
    b.close()


def _submit(backend, spec_factory, wid="wl-mk") -> str:
    identity = ProjectIdentity(tenant="acme", project="proj", k8s_namespace=NAMESPACE)
    return backend.submit(spec_factory(gpus_per_worker=4), wid, identity)


def test_worker_cluster_from_manager_workload(manager, backend, spec_factory):
    job_id = _submit(backend, spec_factory)
    manager.kueue.reconcile()
    pending = backend.status([job_id])[job_id]
    assert pending.state == JobState.PENDING and pending.reason == Reason.WAITING
    assert "nominated: worker1, worker2, worker3" in pending.raw_reason
    assert pending.worker_cluster == ""
    manager.kueue.dispatch(job_id, "worker2")
    running = backend.status([job_id])[job_id]
    assert running.state == JobState.RUNNING and running.worker_cluster == "worker2"
    assert backend.find("wl-mk").worker_cluster == "worker2"
    assert manager.store.list(("", "pods")) == []  # nothing runs on the manager


def test_inventory_counts_each_worker_once(backend):
    snap = backend.inventory()
    nodes = [n.name for p in snap.pools for n in p.nodes]
    assert sorted(nodes) == ["worker1/node-1", "worker1/node-2", "worker2/node-1"]
    assert sum(p.gpus_total for p in snap.pools) == 16  # 4 + 4 + 8; manager's 8 not counted
    assert {p.name for p in snap.pools} == {f"worker1/{A100}", f"worker2/{A100}"}
    assert all(p.owner == "multikueue" for p in snap.pools)
    assert backend.skipped_workers == {"worker3": "no client configuration for this worker"}


def test_worker_allocation_and_queue_stats(manager, workers, backend, spec_factory):
    workers["worker1"].store.create(("", "pods"), "team", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"nodeName": "node-1", "containers": [{"name": "c", "resources": {
            "limits": {"nvidia.com/gpu": "3"}}}]}, "status": {"phase": "Running"}})
    _submit(backend, spec_factory, "wl-a")
    _submit(backend, spec_factory, "wl-b")
    _submit(backend, spec_factory, "wl-c")
    _submit(backend, spec_factory, "wl-d")
    _submit(backend, spec_factory, "wl-e")  # 20 GPUs asked, manager quota 16
    manager.kueue.reconcile()
    snap = backend.inventory()
    assert sum(p.gpus_allocated for p in snap.pools) == 3
    assert snap.queue.pending_jobs == 1 and snap.queue.pending_gpus == 4


def test_inactive_or_unreachable_worker_contributes_nothing(manager, workers, spec_factory):
    seed = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueConfig",
            "metadata": {"name": "only"}, "spec": {"clusters": ["worker1", "worker2"]}}
    manager.add("kueue.x-k8s.io", "multikueueconfigs", seed)
    manager.store.get(("kueue.x-k8s.io", "multikueueclusters"), "", "worker1")["status"][
        "conditions"][0]["status"] = "False"
    workers["worker2"].set_fault("refuse")
    backend = MultiKueueBackend("fleet-mk", _config(manager), multikueue_config="only",
                                workers={n: _config(w) for n, w in workers.items()})
    snap = backend.inventory()
    assert snap.pools == ()
    assert set(backend.skipped_workers) == {"worker1", "worker2"}
    workers["worker2"].set_fault(None)
    assert {p.name for p in backend.inventory().pools} == {f"worker2/{A100}"}
