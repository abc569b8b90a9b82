"""The mapping read against objects captured from the real control planes
(scripts/k8s-cluster; data/real/, see docs/kubernetes.md "What the real controllers showed")."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from broker.backends.base import JobState, Reason
from broker.backends.kube.kueue import classify_pending, kueue_state, workload_gpus
from broker.backends.kube.limits import volcano_limits
from broker.backends.kube.volcano_objects import gang_reason, over_capability, pod_group_gpus

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


def test_volcano_gang_with_three_of_four_placeable_waits_as_gang():
    pg = captured("volcano-podgroup-gang-pending")  # Inqueue, Unschedulable/NotEnoughResources
    reason, raw = gang_reason(pg, "Open", "gang-q")
    assert reason == Reason.GANG and "Pending: 1 Unschedulable, 3 Schedulable" in raw


def test_volcano_gang_over_queue_capability_has_no_condition_only_an_event_and_is_policy():
    pg = captured("volcano-podgroup-capability-pending")
    assert pg["status"] == {"phase": "Pending"}  # no condition at all
    events = tuple(e.split(": ", 1)[1] for e in captured("volcano-podgroup-events-capability-pending"))
    capability = {"nvidia.com/gpu": "2"}
    assert over_capability(pg, capability)
    reason, raw = gang_reason(pg, "Open", "small-q", events, capability)
    assert (reason, raw) == (Reason.POLICY, "queue resource quota insufficient: insufficient "
                                            "nvidia.com/gpu")
    assert gang_reason(pg, "Open", "small-q", events, {"nvidia.com/gpu": "8"})[0] \
        == Reason.CAPACITY  # fits once the queue's running jobs end
    assert gang_reason(pg, "Open", "small-q")[0] == Reason.NONE  # no event yet


def test_volcano_podgroup_min_resources_count_gpus_only_when_the_template_requests_them():
    pg = captured("volcano-podgroup-gang-pending")  # our manifest requests GPUs beside limits
    assert pg["spec"]["minResources"]["nvidia.com/gpu"] == "8"
    assert pg["spec"]["minResources"]["requests.nvidia.com/gpu"] == "8"
    assert pod_group_gpus(pg) == 8  # the two spellings of one request, counted once


def test_volcano_webhook_writes_max_retry_3_over_our_0():
    job = captured("volcano-job-defaulted")
    assert job["spec"]["maxRetry"] == 3
    assert {"event": "PodEvicted", "action": "TerminateJob"} in job["spec"]["policies"]


def test_volcano_webhook_denials_are_400_with_volcanos_text():
    missing = json.loads(captured("volcano-webhook-denied-missing-queue"))
    assert missing["code"] == 400 and missing["message"].endswith(
        'unable to find job queue: queue.scheduling.volcano.sh "no-such-queue" not found;')
    too_big = json.loads(captured("volcano-webhook-denied-minavailable"))
    assert "job 'minAvailable' should not be greater than total replicas in tasks;" \
        in too_big["message"]


def test_volcano_queue_allocated_counts_running_gpus_against_capability():
    queue = captured("volcano-queue-capability-running")
    (quota,) = volcano_limits([queue], "default").quotas
    assert (quota.limit_gpus, quota.used_gpus, quota.headroom_gpus) == (6, 4, 2)
