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


def test_a_clusterqueue_borrows_what_its_cohort_lends_up_to_its_borrowing_limit():
    cqs = [_cq("gpu-cq", [("a100", 16, 8), ("h100", "8", None)], cohort="org", usage={"a100": 12}),
           _cq("lender", [("a100", 4, None), ("h100", 6, None)], cohort="org", usage={"h100": 2})]
    limits = kueue_limits(cqs, [_lq("default", "gpu-cq"), _lq("other", "lender")], "gpu", "default")
    mine = {q.source: q for q in limits.quotas_for("a100") + limits.quotas_for("h100")}
    # a100: the lender lends 4 of the 8 it could borrow; h100: no borrowing limit, all 6
    assert mine["ClusterQueue gpu-cq flavor a100"] == GroupQuota(
        "ClusterQueue gpu-cq flavor a100", pool="a100", limit_gpus=20, used_gpus=12, borrow_gpus=4)
    assert mine["ClusterQueue gpu-cq flavor a100"].nominal_gpus == 16
    assert mine["ClusterQueue gpu-cq flavor h100"].limit_gpus == 14
    # the queues of a cohort share its total: what the lender runs is not there to borrow
    assert mine["cohort org flavor h100"] == GroupQuota(
        "cohort org flavor h100", pool="h100", limit_gpus=14, used_gpus=2)
    assert [q.scope for q in limits.quotas if q.source == "cohort org flavor a100"] == ["", "other"]


def test_a_clusterqueue_alone_in_its_cohort_borrows_nothing():
    cqs = [_cq("gpu-cq", [("a100", 16, 8)], cohort="org", usage={"a100": 12})]
    limits = kueue_limits(cqs, [_lq("default", "gpu-cq")], "gpu", "default")
    assert limits.quotas == (
        GroupQuota("ClusterQueue gpu-cq flavor a100", pool="a100", limit_gpus=16, used_gpus=12),)
    assert limits.quotas[0].headroom_gpus == 4


def test_a_clusterqueue_that_preempts_lower_priority_says_so():
    cq = _cq("gpu-cq", [("a100", 8, None)])
    cq["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Never"}
    never = _cq("other-cq", [("a100", 8, None)])
    never["spec"]["preemption"] = {"withinClusterQueue": "Never"}
    limits = kueue_limits([cq, never], [_lq("default", "gpu-cq"), _lq("o", "other-cq")], "gpu", "default")
    assert [(q.scope, q.preemption) for q in limits.quotas] == [("", "LowerPriority"), ("o", "")]


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
