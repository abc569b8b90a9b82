"""The mapping read against objects captured from the real control planes
(scripts/k8s-cluster; data/real/, see docs/kubernetes.md "What the real controllers showed")."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from broker.backends.base import JobState, Reason
from broker.backends.kube.kueue import classify_pending, kueue_state, workload_gpus

REAL = Path(__file__).parent / "data" / "real"
JOB = {"metadata": {"name": "j", "namespace": "team"}, "spec": {"suspend": True}, "status": {}}


def captured(name: str) -> dict[str, Any]:
    return json.loads((REAL / f"{name}.json").read_text())


def test_quota_in_use_with_another_flavor_not_matching_waits_as_capacity():
    wl = captured("kueue-workload-pending-quota")
    state, reason, raw = kueue_state(JOB, wl)
    assert "flavor h100 doesn't match node affinity" in raw  # the other flavor is listed too
    assert (state, reason) == (JobState.PENDING, Reason.CAPACITY)


def test_request_above_maximum_capacity_is_policy():
    wl = captured("kueue-workload-pending-above-max")
    state, reason, raw = kueue_state(JOB, wl)
    assert "> maximum capacity (8)" in raw
    assert (state, reason) == (JobState.PENDING, Reason.POLICY)


def test_admitted_workload_whose_pods_are_not_ready_waits_and_counts_its_admitted_gpus():
    wl = captured("kueue-workload-admitted")  # Admitted=True, PodsReady=False/WaitForStart
    state, reason, raw = kueue_state({**JOB, "spec": {"suspend": False}}, wl)
    assert (state, reason) == (JobState.PENDING, Reason.WAITING) and "WaitForStart" in raw
    running = {**JOB, "spec": {"suspend": False}, "status": {"active": 2, "ready": 2}}
    assert kueue_state(running, wl)[0] == JobState.RUNNING
    assert workload_gpus(wl, admitted_only=True) == 8


def test_every_flavor_short_only_of_maximum_is_policy_and_one_short_of_unused_is_capacity():
    head = "couldn't assign flavors to pod set main: "
    assert classify_pending("Pending", head + "flavor h100 doesn't match node affinity, "
                            "insufficient quota for nvidia.com/gpu in flavor a100, previously "
                            "considered podsets requests (0) + current podset request (16) > "
                            "maximum capacity (8)") == Reason.POLICY
    assert classify_pending("Pending", head + "insufficient unused quota for nvidia.com/gpu in "
                            "flavor h100, 2 more needed, flavor a100 doesn't match node "
                            "affinity") == Reason.CAPACITY
