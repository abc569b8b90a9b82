"""Hostile input to the Kubernetes parsers: nodes and pods (the inventory), Kueue Jobs and
Workloads, Volcano jobs and PodGroups, resource quantities and times.  An object with a field
of the wrong type fails with an error naming that very field; the good nodes beside a broken
one are read as they would be alone."""
from __future__ import annotations

import re

from hypothesis import example, given
from hypothesis import strategies as st

from tests.parsers.hostile import FAST, broken, failure, field_name, json_values, names_a_broken_field


def _k8s_node(name: str = "gpu-1") -> dict:
    return {"metadata": {"name": name, "labels": {
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.memory": "81920",
        "nvidia.com/gpu.count": "8", "nvidia.com/mig.strategy": "mixed"}},
        "spec": {"taints": [{"key": "x", "effect": "NoSchedule"}]},
        "status": {"capacity": {"nvidia.com/gpu": "4", "nvidia.com/mig-1g.10gb": "7", "cpu": "64"},
                   "allocatable": {"nvidia.com/gpu": "4", "nvidia.com/mig-1g.10gb": "7"},
                   "conditions": [{"type": "Ready", "status": "True"}]}}


def _k8s_pod() -> dict:
    return {"metadata": {"name": "p"}, "spec": {"nodeName": "gpu-1", "containers": [
        {"resources": {"limits": {"nvidia.com/gpu": "2"}}}]}, "status": {"phase": "Running"}}


def _kueue_job() -> dict:
    return {"metadata": {"name": "wl-abc-train", "namespace": "lattice", "uid": "u1",
                         "labels": {"gpubroker.io/workload": "wl-abc"}},
            "spec": {"parallelism": 2, "template": {"spec": {"containers": [
                {"resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}},
            "status": {"conditions": [{"type": "Complete", "status": "False"}], "startTime": "2026-01-01T00:00:00Z"}}


def _kueue_workload() -> dict:
    return {"metadata": {"name": "job-wl", "ownerReferences": [{"uid": "u1"}]},
            "spec": {"podSets": [{"name": "main", "count": 2, "template": {"spec": {"containers": [
                {"resources": {"requests": {"nvidia.com/gpu": "2"}}}]}}}]},
            "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                                       "message": "couldn't assign flavors: insufficient unused quota"}],
                       "admission": {"podSetAssignments": [{"count": 2, "flavors": {"nvidia.com/gpu": "a100"},
                                                            "resourceUsage": {"nvidia.com/gpu": "4"}}]}}}


def _vcjob() -> dict:
    return {"metadata": {"name": "wl-abc", "namespace": "lattice"},
            "spec": {"minAvailable": 2, "queue": "default", "tasks": [{"replicas": 2, "template": {"spec": {
                "containers": [{"resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}}]},
            "status": {"state": {"phase": "Running", "lastTransitionTime": "2026-01-01T00:00:00Z"}}}


def _named(where: list, prefix: tuple = ()) -> list[str]:
    return [field_name(prefix + tuple(p)) for p in where]


@FAST
@given(st.data())
@example(data=None)
def test_kubernetes_nodes_and_pods_give_pools_or_fail_clearly(data):
    from broker.backends.kube.settings import BackendSettings
    from broker.backends.kube.inventory import build_pools, product_namer

    def entries(pools):
        return sorted((n.name, n.gpus_total, n.gpus_allocatable, n.partitioning)
                      for pool in pools for n in pool.nodes if n.name == "good-1")

    good = _k8s_node("good-1")  # first, untouched: what it gives alone it gives beside the broken ones
    alone = entries(build_pools([good], [], BackendSettings(), "kueue", product_namer))
    assert alone  # it has GPUs: the check below is not empty
    if data is None:  # the explicit example: a GPU count no number can hold
        bad = _k8s_node()
        bad["status"]["capacity"]["nvidia.com/gpu"] = "1e309"
        error = failure(build_pools, [good, bad], [], BackendSettings(), "kueue", product_namer)
        assert str(error) == ("field nodes[1].status.capacity['nvidia.com/gpu']: "
                              "expected a finite resource quantity, got str '1e309'")
        return
    nodes = [data.draw(broken(_k8s_node())) for _ in range(data.draw(st.integers(1, 3)))]
    pods = [data.draw(broken(_k8s_pod())) for _ in range(data.draw(st.integers(0, 3)))]
    where = [n for i, (_, w) in enumerate(nodes) for n in _named(w, (f"nodes[{i + 1}]",))]
    where += [n for i, (_, w) in enumerate(pods) for n in _named(w, (f"pods[{i}]",))]
    try:
        pools = build_pools([good] + [n for n, _ in nodes], [p for p, _ in pods], BackendSettings(), "kueue",
                            product_namer)
    except ValueError as exc:
        assert names_a_broken_field(exc, where), f"{exc} names none of {where}"
        return
    assert entries(pools) == alone
    for pool in pools:
        for n in pool.nodes:
            assert n.gpus_total > 0


@FAST
@given(st.data())
def test_kueue_and_volcano_objects_give_a_state_or_fail_clearly(data):
    from broker.backends.kube import kueue, volcano_objects

    (job, job_broken), (wl, wl_broken) = data.draw(broken(_kueue_job())), data.draw(broken(_kueue_workload()))
    vc, vc_broken = data.draw(broken(_vcjob()))
    group, group_broken = data.draw(broken({"status": {"phase": "Pending", "conditions": [
        {"type": "Unschedulable", "status": "True", "message": "2/4 tasks in gang unschedulable"}]}}))
    for error, where in (
        (failure(kueue.kueue_state, job, wl), job_broken + wl_broken),
        (failure(kueue.job_gpus, job), job_broken),
        (failure(kueue.workload_gpus, wl), wl_broken),
        (failure(volcano_objects.vcjob_gpus, vc), vc_broken),
        (failure(volcano_objects.gang_reason, group, data.draw(st.sampled_from(["Open", "Closed", ""])), "default"),
         group_broken),
    ):
        assert error is None or names_a_broken_field(error, _named(where)), f"{error!r} names none of {_named(where)}"


@FAST
@given(json_values)
@example(value="1e309")
def test_kubernetes_quantities_and_times(value):
    from broker.backends.kube.common import parse_time, quantity

    error = failure(quantity, value)
    # read bare (no field to name), the message quotes the value itself
    assert error is None or re.fullmatch(rf"resource quantity {re.escape(repr(str(value)[:40]))} is not a finite "
                                         "number", str(error)), error
    if value == "1e309":
        assert error is not None
    if isinstance(value, str) or value is None:
        assert failure(parse_time, value) is None  # a time it cannot read is no time, not an error
