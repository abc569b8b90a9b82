"""Kueue ClusterQueue quota and Volcano queue capability read into LocalLimits: from
objects as the API serves them, and through the API emulator."""
from __future__ import annotations

from broker.backends.kube.limits import kueue_limits, volcano_limits
from broker.local_limits import GroupQuota


def _cq(name, flavors, *, cohort="", usage=None):
    resources = [{"name": f, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": q,
                                            **({"borrowingLimit": b} if b is not None else {})}]}
                 for f, q, b in flavors]
    spec = {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
        {"name": "cpu", "resources": [{"name": "cpu", "nominalQuota": 1000}]}]},
        {"coveredResources": ["nvidia.com/gpu"], "flavors": resources}]}
    if cohort:
        spec["cohort"] = cohort
    status = {"flavorsReservation": [{"name": f, "resources": [{"name": "nvidia.com/gpu", "total": str(u)}]}
                                     for f, u in (usage or {}).items()]}
    return {"metadata": {"name": name}, "spec": spec, "status": status}


def _lq(name, cq, namespace="gpu"):
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"clusterQueue": cq}}


def test_clusterqueue_quota_borrowing_and_reserved_use_per_gpu_flavor():
    cqs = [_cq("gpu-cq", [("a100", 16, 8), ("h100", "8", None)], cohort="org", usage={"a100": 12})]
    limits = kueue_limits(cqs, [_lq("default", "gpu-cq")], "gpu", "default")
    assert limits.quotas == (
        GroupQuota("ClusterQueue gpu-cq flavor a100", pool="a100", limit_gpus=24, used_gpus=12, borrow_gpus=8),
        GroupQuota("ClusterQueue gpu-cq flavor h100", pool="h100", limit_gpus=None),  # cohort, no limit
    )
    assert limits.quotas[0].headroom_gpus == 12 and limits.quotas[0].nominal_gpus == 16


def test_a_clusterqueue_only_another_queue_feeds_applies_to_that_queue_only():
    cqs = [_cq("team-cq", [("a100", 4, None)])]
    limits = kueue_limits(cqs, [_lq("team", "team-cq")], "gpu", "default")
    assert [q.scope for q in limits.quotas] == ["team"]
    assert limits.quotas_for("a100") == [] and len(limits.quotas_for("a100", ["team"])) == 1


def test_volcano_queue_capability_against_allocated():
    queues = [{"metadata": {"name": "research"}, "spec": {"capability": {"nvidia.com/gpu": "16", "cpu": "64"}},
               "status": {"allocated": {"nvidia.com/gpu": "6"}}},
              {"metadata": {"name": "open"}, "spec": {}}]
    limits = volcano_limits(queues, "research")
    assert limits.quotas == (GroupQuota("Volcano queue research (capability nvidia.com/gpu=16)",
                                        limit_gpus=16, used_gpus=6),)
