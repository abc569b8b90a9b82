"""Volcano specifics: gang waiting vs no room, queue state, webhook rejection, manifest."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

import pytest

from broker.backends.base import JobState, Reason, Rejected
from broker.backends.kube import BackendSettings, VolcanoBackend
from tests.broker.backends.kube.emu.emulator_seed import seed_volcano
from broker.backends.kube.volcano_objects import gang_reason


def test_closed_queue_after_submit_is_unavailable(volcano):
    job_id = volcano.submit("wl-q")
    volcano.emu.volcano.set_queue_state("default", "Closed")
    volcano.step()
    job = volcano.backend.status([job_id])[job_id]
    assert job.state == JobState.PENDING and job.reason == Reason.UNAVAILABLE
    assert job.raw_reason == "Volcano queue default is Closed"


def test_submit_to_closed_queue_is_rejected_by_webhook(volcano):
    seed_volcano(volcano.emu, name="closed", state="Closed")
    volcano.identity = replace(volcano.identity, queue="closed")
    with pytest.raises(Rejected) as err:
        volcano.submit("wl-c")
    assert "can only submit job to queue with state `Open`" in err.value.raw
    assert volcano.job_objects() == []


def test_submit_to_missing_queue_is_rejected(volcano):
    volcano.identity = replace(volcano.identity, queue="nope")
    with pytest.raises(Rejected, match="HTTP 400"):
        volcano.submit("wl-n")


def test_crd_schema_violation_is_rejected_with_raw_text(volcano, spec_factory, monkeypatch):
    backend = volcano.backend
    original = backend.build_manifest

    def broken(*args):
        body = original(*args)
        body["spec"]["minAvailable"] = "all"  # not an integer
        return body
    monkeypatch.setattr(backend, "build_manifest", broken)
    with pytest.raises(Rejected) as err:
        backend.submit(spec_factory(), "wl-x", volcano.identity)
    assert "422" in err.value.reason and "minAvailable" in err.value.raw


def test_a_fleet_priority_class_named_at_volcano_is_its_priority_class_name(volcano, spec_factory):
    backend = VolcanoBackend("k8s-1", volcano.backend.kube.config,
                             BackendSettings(priority_classes={"high": "urgent", "production": "vc-prod"}))
    body = backend.build_manifest(spec_factory(priority="high", priority_class="production"), "wl-c", volcano.identity)
    assert body["spec"]["priorityClassName"] == "vc-prod"


def test_manifest_shape(volcano, spec_factory):
    backend = VolcanoBackend("k8s-1", volcano.backend.kube.config,
                             BackendSettings(priority_classes={"high": "urgent"}))
    body = backend.build_manifest(spec_factory(workers=3, gpus_per_worker=2, priority="high"),
                                  "wl-s", volcano.identity)
    assert body["spec"]["schedulerName"] == "volcano"
    assert body["spec"]["minAvailable"] == 3 and body["spec"]["queue"] == "default"
    [task] = body["spec"]["tasks"]
    assert task["name"] == "worker" and task["replicas"] == 3
    limits = task["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == "2"
    assert body["spec"]["priorityClassName"] == "urgent"
    assert body["metadata"]["labels"]["gpubroker.io/workload-id"] == "wl-s"


def test_pending_gang_without_pod_group_yet(volcano):
    job_id = volcano.submit("wl-early")
    job = volcano.backend.status([job_id])[job_id]
    assert job.state == JobState.PENDING and job.reason == Reason.OTHER


@pytest.mark.parametrize("message,expected", [
    ("3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable; "
     "Pending: 3 Unschedulable", Reason.CAPACITY),
    ("6/6 tasks in gang unschedulable: pod group is not ready, 6 Pending, 6 minAvailable; "
     "Pending: 1 Unschedulable, 2 Undetermined, 3 Schedulable", Reason.GANG),
    # real Volcano v1.14.1 with its preempt action on (CI's cluster): the members that fit
    # are "Pipelined"
    ("4/4 tasks in gang unschedulable: pod group is not ready, 1 Pending, 3 Pipelined, 4 minAvailable; "
     "Pending: 1 Unschedulable. Origin reason is wl-gang-gang-worker-3: 0/7 nodes are unavailable: "
     "3 node(s) didn't match Pod's node affinity/selector, 4 Insufficient nvidia.com/gpu.", Reason.GANG),
    ("1/0 tasks in gang unschedulable: pod group is not ready, 1 minAvailable.", Reason.CAPACITY),
])
def test_gang_reason_parses_volcano_messages(message, expected):
    pg = {"status": {"conditions": [{"type": "Unschedulable", "status": "True",
                                     "reason": "NotEnoughResources", "message": message}]}}
    assert gang_reason(pg, "Open", "default") == (expected, message)


def test_gang_reason_queue_states():
    assert gang_reason(None, "Closing", "q")[0] == Reason.UNAVAILABLE
    assert gang_reason(None, "Missing", "q")[0] == Reason.UNAVAILABLE
    assert gang_reason({"status": {"phase": "Inqueue"}}, "Open", "q")[0] == Reason.NONE


def test_gang_above_queue_capability_is_policy_from_the_podgroup_event(volcano):
    # real Volcano: no PodGroup condition, only an event (data/real/volcano-podgroup-*-capability-*)
    volcano.emu.add("scheduling.volcano.sh", "queues", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": "small"},
        "spec": {"weight": 1, "capability": {"nvidia.com/gpu": "2"}}, "status": {"state": "Open"}})
    volcano.identity = replace(volcano.identity, queue="small")
    job_id = volcano.submit("wl-cap", workers=2, gpus_per_worker=2)
    volcano.step()
    job = volcano.backend.status([job_id])[job_id]
    assert job.state == JobState.PENDING and job.reason == Reason.POLICY
    assert job.raw_reason == "queue resource quota insufficient: insufficient nvidia.com/gpu"


def test_manifest_requests_the_gpus_it_limits(volcano, spec_factory):
    body = volcano.backend.build_manifest(spec_factory(gpus_per_worker=2), "wl-r", volcano.identity)
    res = body["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]
    assert res["requests"]["nvidia.com/gpu"] == res["limits"]["nvidia.com/gpu"] == "2"
    assert "maxRetry" not in body["spec"]


def test_a_job_volcano_evicted_a_pod_of_waits_again_saying_by_what_and_is_charged_for_its_runs(volcano):
    job_id = volcano.submit("wl-a", workers=2)  # vcjob wl-a-train, pods wl-a-train-worker-<i>
    other = volcano.submit("wl-a-train-worker-1")  # its pods' names begin as the first's do
    volcano.step()
    volcano.emu.advance(60)
    volcano.emu.volcano.evict(job_id)
    jobs = volcano.backend.status([job_id, other])
    assert jobs[job_id].state == JobState.PENDING  # restarted in its queue, as Kueue requeues
    assert jobs[job_id].raw_reason.startswith(
        "Volcano evicted pod wl-a-train-worker-0: Pod is evicted, because of preempt; now: ")
    # only the job whose own pod was evicted
    assert jobs[other].state == JobState.RUNNING and "evicted" not in jobs[other].raw_reason
    volcano.emu.advance(600)  # waiting (the job that preempted it runs): not charged
    volcano.step()
    volcano.emu.advance(30)
    volcano.finish(job_id)
    usage = {u.job_id: u for u in volcano.backend.usage(datetime(2026, 3, 1, tzinfo=timezone.utc))}
    assert usage[job_id].gpu_seconds == 2 * (60 + 30)  # two workers of one GPU, for both runs


def test_a_job_that_ended_on_an_eviction_says_so(volcano):
    # sent by an earlier release, whose policy terminated an evicted job
    job_id = volcano.submit("wl-old")
    volcano.step()
    volcano.emu.volcano.evict(job_id, then="Terminated")
    job = volcano.backend.status([job_id])[job_id]
    assert job.state == JobState.FAILED
    assert job.outcome.summary == "Volcano evicted pod wl-old-train-worker-0: Pod is evicted, because of preempt"
    assert job.outcome.end_reason == "Evict"


def test_a_job_that_failed_with_no_pod_evicted_stays_failed(volcano):
    job_id = volcano.submit("wl-failed")
    volcano.step()
    volcano.finish(job_id, ok=False)
    assert volcano.backend.status([job_id])[job_id].state == JobState.FAILED
