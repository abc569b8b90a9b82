"""From a manager Workload (captured from the real dispatcher-mode manager) to the broker's
spec and the workers it may nominate; the full loop runs against real clusters in
tests/broker/backends/kube/mk_dispatcher."""
from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from broker.backends.kube.dispatcher import ManagerView, parse_workload
from broker.models import Cluster
from broker.services.dispatching.multikueue_nominate import (
    NotMapped,
    _worker_exclusions,
    build_spec,
    dispatcher_config,
)
from tests.factories import (
    ClusterFactory,
    GpuClassFactory,
    ProjectFactory,
    TenantFactory,
)

REAL = Path(__file__).parents[2] / "backends" / "kube" / "data" / "real"
PRODUCT = "NVIDIA-A100-SXM4-80GB"


def workload():
    obj = json.loads((REAL / "multikueue-dispatcher-workload-pending.json").read_text())
    return parse_workload(obj, {"mkd-check"})


def manager(queues=None) -> Cluster:
    return ClusterFactory(name="mgr", kind="multikueue", config={"dispatcher": {
        "workers": {"worker-main": "w-a", "worker-worker2": "w-b"},
        "queues": queues if queues is not None else {"mkd/default": {"project": "lattice", "gpu_class": "a100-80gb"}},
        "model_names": {PRODUCT: "NVIDIA A100-SXM4-80GB"}, "priorities": {"gpubroker-high": "high"}}})


@pytest.mark.django_db
def test_the_pod_sets_and_the_queue_mapping_make_the_spec():
    tenant = TenantFactory(slug="physics")
    ProjectFactory(tenant=tenant, slug="lattice")
    # both classes list the model: the queue's own class wins
    GpuClassFactory(slug="a100-40gb", gpu_models=["NVIDIA A100-SXM4-80GB"], min_memory_gb=40)
    GpuClassFactory(slug="a100-80gb")
    project, gpu_class, spec = build_spec(workload(), dispatcher_config(manager()))
    assert (project.slug, project.tenant.slug, gpu_class.slug) == ("lattice", "physics", "a100-80gb")
    assert (spec["workers"], spec["gpus_per_worker"], spec["gpu_models"]) == (2, 2, ["NVIDIA A100-SXM4-80GB"])
    assert spec["priority"] == "normal" and spec["command"].startswith("(MultiKueue Workload mkd/")


@pytest.mark.django_db
def test_a_queue_without_a_project_is_not_placed_and_says_which_queue():
    with pytest.raises(NotMapped, match="queue mkd/default has no project"):
        build_spec(workload(), dispatcher_config(manager(queues={})))


@pytest.mark.django_db
def test_a_worker_that_is_stale_here_or_inactive_in_multikueue_is_excluded_as_stale():
    cfg = dispatcher_config(manager())
    a = ClusterFactory(name="w-a", kind="kueue", health="stale", last_error="connection refused")
    b = ClusterFactory(name="w-b", kind="kueue")
    view = ManagerView(taken_at=datetime.now(UTC), workloads=(), active_workers=frozenset({"worker-main"}),
                       inactive_workers={"worker-worker2": "cannot reach the worker"})
    out = _worker_exclusions(view, cfg, {"w-a": a, "w-b": b})
    assert {name: e.rule for name, e in out.items()} == {"w-a": "stale", "w-b": "stale"}
    assert "connection refused" in out["w-a"].message and "cannot reach" in out["w-b"].message
    healthy = ManagerView(taken_at=view.taken_at, workloads=(),
                          active_workers=frozenset({"worker-main", "worker-worker2"}), inactive_workers={})
    a.health = "healthy"
    assert _worker_exclusions(healthy, cfg, {"w-a": a, "w-b": b}) == {}
