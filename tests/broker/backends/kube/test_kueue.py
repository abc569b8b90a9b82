"""Kueue specifics: pending reasons, queue state, eviction, labels, inventory details."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

import pytest

from broker.backends.base import JobState, Reason
from broker.backends.kube import BackendSettings, KueueBackend
from tests.broker.backends.kube.emu.emulator_seed import KUEUE
from broker.backends.kube.kueue import classify_pending, kueue_state

CQS = (KUEUE, "clusterqueues")


def test_wrong_gpu_model_for_every_flavor_is_policy(kueue):
    job_id = kueue.submit("wl-4", gpu_models=("NVIDIA-H100-80GB-HBM3",))
    kueue.step()
    job = kueue.backend.status([job_id])[job_id]
    assert job.reason == Reason.POLICY and "doesn't match node affinity" in job.raw_reason


def test_stopped_cluster_queue_is_unavailable(kueue):
    cq = kueue.emu.store.get(CQS, "", "gpu-cq")
    cq["spec"]["stopPolicy"] = "Hold"
    job_id = kueue.submit("wl-5")
    kueue.step()
    job = kueue.backend.status([job_id])[job_id]
    assert job.reason == Reason.UNAVAILABLE and job.raw_reason == "ClusterQueue gpu-cq is inactive"


def test_missing_local_queue_is_unavailable(kueue):
    kueue.identity = replace(kueue.identity, queue="nope")
    job_id = kueue.submit("wl-6")
    kueue.step()
    job = kueue.backend.status([job_id])[job_id]
    assert job.reason == Reason.UNAVAILABLE and "LocalQueue nope" in job.raw_reason
    assert kueue.job_objects()[0]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "nope"


def test_no_workload_yet_is_pending_other(kueue):
    job_id = kueue.submit("wl-7")
    job = kueue.backend.status([job_id])[job_id]
    assert job.state == JobState.PENDING and job.reason == Reason.OTHER


def test_preempted_workload_goes_back_to_pending(kueue):
    job_id = kueue.submit("wl-8")
    kueue.step()
    kueue.emu.kueue.evict(job_id)
    job = kueue.backend.status([job_id])[job_id]
    assert job.state == JobState.PENDING and job.reason == Reason.CAPACITY
    assert "Preempted" in job.raw_reason
    assert kueue.job_objects()[0]["spec"]["suspend"] is True


def test_cluster_queue_stopped_eviction_is_unavailable(kueue):
    job_id = kueue.submit("wl-9")
    kueue.step()
    kueue.emu.kueue.evict(job_id, reason="ClusterQueueStopped",
                          message="The ClusterQueue is stopped")
    assert kueue.backend.status([job_id])[job_id].reason == Reason.UNAVAILABLE


def test_deactivated_workload_is_held(kueue):
    job_id = kueue.submit("wl-10")
    kueue.step()
    kueue.emu.kueue.evict(job_id)
    kueue.emu.kueue.deactivate(job_id)
    assert kueue.backend.status([job_id])[job_id].reason == Reason.HELD


def test_admission_checks_pending_is_waiting(emu, kueue):
    emu.store.get(CQS, "", "gpu-cq")["spec"]["admissionChecksStrategy"] = {
        "admissionChecks": [{"name": "prov"}]}
    job_id = kueue.submit("wl-11")
    kueue.step()
    job = kueue.backend.status([job_id])[job_id]
    assert job.state == JobState.PENDING and job.reason == Reason.WAITING
    assert "prov: Pending" in job.raw_reason


@pytest.mark.parametrize("priority,label", [("high", "research-high"), ("low", "scavenger"),
                                            ("normal", None), (("high", "production"), "prod-wpc"),
                                            (("normal", "rush"), None)])
def test_priority_maps_to_workload_priority_class(kueue, spec_factory, priority, label):
    backend = KueueBackend("k8s-1", kueue.backend.kube.config, BackendSettings(
        priority_classes={"high": "research-high", "low": "scavenger", "production": "prod-wpc"}))
    # a (level, fleet class) pair: the class's name here wins, else the level's
    level, named = priority if isinstance(priority, tuple) else (priority, "")
    job_id = backend.submit(spec_factory(priority=level, priority_class=named), "wl-p", kueue.identity)
    job = kueue.job_objects()[0]
    assert job["metadata"]["labels"].get("kueue.x-k8s.io/priority-class") == label
    assert job["spec"]["suspend"] is True and job["spec"]["completionMode"] == "Indexed"
    kueue.step()
    wl = kueue.emu.kueue.workload(job_id)
    assert (wl["spec"].get("priorityClassRef") or {}).get("name") == label


def test_mig_job_uses_mig_resource_and_flavor(kueue):
    job_id = kueue.submit("wl-12", mig_profile="1g.10gb", gpus_per_worker=2,
                          gpu_models=("NVIDIA-A100-SXM4-40GB",))
    container = kueue.job_objects()[0]["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/mig-1g.10gb"] == "2"
    assert "nvidia.com/gpu" not in container["resources"]["limits"]
    kueue.step()
    job = kueue.backend.status([job_id])[job_id]
    assert job.state == JobState.RUNNING and job.nodes == ("mig-a",)
    mig_pool = [p for p in kueue.backend.inventory().pools if p.partitioning == "1g.10gb"][0]
    assert mig_pool.name == "a100-mig/1g.10gb" and mig_pool.gpus_allocated == 2


def test_inventory_uses_flavor_names_and_node_health(emu, kueue):
    emu.add_node("gpu-c", gpus=4, ready=False)
    emu.add_node("gpu-d", gpus=4, unschedulable=True)
    emu.add_node("gpu-e", gpus=4, taints=[{"key": "maintenance", "effect": "NoSchedule"}])
    emu.add_node("gpu-f", gpus=4, taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}])
    emu.add_node("h100-a", product="NVIDIA-H100-80GB-HBM3", gpus=8)
    snap = kueue.backend.inventory()
    by_node = {n.name: n for p in snap.pools for n in p.nodes if n.partitioning == "whole"}
    assert not by_node["gpu-c"].healthy and by_node["gpu-c"].gpus_free == 0
    assert by_node["gpu-d"].draining and by_node["gpu-e"].draining
    assert not by_node["gpu-f"].draining  # the usual GPU-node taint is not draining
    names = {p.name for p in snap.pools}
    assert {"a100", "NVIDIA-H100-80GB-HBM3", "a100-mig/1g.10gb"} <= names
    a100 = next(p for p in snap.pools if p.name == "a100")
    assert a100.gpu_memory_gb == 80 and a100.gpus_free == 8 + 4


def test_model_names_translate_products(emu, kueue, spec_factory):
    settings = BackendSettings(model_names={"NVIDIA-A100-SXM4-80GB": "A100-80GB"},
                               gpu_classes={"a100-80gb": ("A100-80GB",)})
    backend = KueueBackend("k8s-1", kueue.backend.kube.config, settings)
    backend.submit(spec_factory(gpu_models=(), gpu_class="a100-80gb"), "wl-m", kueue.identity)
    tpl = kueue.job_objects()[0]["spec"]["template"]["spec"]
    assert tpl["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    models = {p.gpu_model for p in backend.inventory().pools}
    assert "A100-80GB" in models


@pytest.mark.parametrize("reason,message,expected", [
    ("Pending", "couldn't assign flavors to pod set main: insufficient unused quota for "
                "nvidia.com/gpu in flavor a100, 4 more needed", Reason.CAPACITY),
    ("Pending", "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu "
                "in flavor a100, previously considered podsets requests (0) + current podset "
                "request (16) > maximum capacity (8)", Reason.POLICY),
    ("Pending", "couldn't assign flavors to pod set main: insufficient unused quota for "
                "nvidia.com/gpu in flavor a100, 4 more needed; couldn't assign flavors to pod "
                "set w: insufficient quota for cpu in flavor d, previously considered podsets "
                "requests (0) + current podset request (9) > maximum capacity (8)", Reason.POLICY),
    ("Inadmissible", "ClusterQueue gpu-cq is inactive", Reason.UNAVAILABLE),
    ("Pending", "ClusterQueue gpu-cq not found", Reason.UNAVAILABLE),
    ("WaitingForQuota", "waiting", Reason.CAPACITY),
    ("ExceedsMaxQuota", "too big", Reason.POLICY),
    ("NoMatchingFlavor", "no flavor", Reason.POLICY),
    ("Suspended", "", Reason.HELD),
    ("Pending", "something new", Reason.OTHER),
])
def test_classify_pending(reason, message, expected):
    assert classify_pending(reason, message) == expected


def test_a_workload_preempted_and_waiting_again_says_by_what_then_why_it_waits():
    """As real Kueue v0.19 left the compatibility suite's preempted Workload (2026-12-05):
    Evicted stays True (reason Preempted) while QuotaReserved says why it waits now."""
    evicted = ("Preempted to accommodate a workload (UID: 5a8a628b, JobUID: c01c6f57) due to prioritization "
               "in the ClusterQueue; preemptor path: /compat-cq; preemptee path: /compat-cq")
    waits = ("couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor a100, "
             "8 more needed")
    wl = {"spec": {"active": True}, "status": {"conditions": [
        {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": waits},
        {"type": "Evicted", "status": "True", "reason": "Preempted", "message": evicted},
        {"type": "Admitted", "status": "False", "reason": "NoReservation", "message": "no reservation"},
        {"type": "Requeued", "status": "True", "reason": "Preempted", "message": evicted}]}}
    job = {"metadata": {"name": "j", "namespace": "team"}, "spec": {"suspend": True}, "status": {}}
    state, reason, raw = kueue_state(job, wl)
    assert state == JobState.PENDING and reason == Reason.CAPACITY
    assert raw == f"{evicted}; {waits}"


_PREEMPTED = ("Preempted to accommodate a workload (UID: 5a8a628b, JobUID: c01c6f57) due to prioritization "
              "in the ClusterQueue; preemptor path: /compat-cq; preemptee path: /compat-cq")
_RECOVERY = {"type": "PodsReady", "status": "False", "reason": "WaitForRecovery",
             "message": "At least one pod has failed, waiting for recovery"}
_RUNNING_JOB = {"metadata": {"name": "j", "namespace": "team"}, "spec": {"suspend": False}, "status": {"active": 1}}


def _admitted_wl(*conditions: dict) -> dict:
    return {"spec": {"active": True}, "status": {"conditions": [
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "Quota reserved"},
        {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "The workload is admitted"},
        *conditions]}}


def test_a_workload_being_preempted_is_pending_and_says_by_what_even_while_it_still_holds_quota():
    """As real Kueue v0.19 showed the compatibility suite (2026-12-06): Evicted=True comes first,
    then the stopped Job's pod fails while Admitted is still True (PodsReady WaitForRecovery)."""
    wl = _admitted_wl(_RECOVERY, {"type": "Evicted", "status": "True", "reason": "Preempted", "message": _PREEMPTED})
    state, reason, raw = kueue_state(_RUNNING_JOB, wl)
    assert (state, reason, raw) == (JobState.PENDING, Reason.CAPACITY, _PREEMPTED)


def test_an_admitted_workload_whose_pod_failed_runs_on_while_kueue_waits_for_recovery():
    state, reason, raw = kueue_state({**_RUNNING_JOB, "status": {"active": 0}}, _admitted_wl(_RECOVERY))
    assert (state, reason, raw) == (JobState.RUNNING, Reason.NONE, "")


def test_an_admitted_workload_readmitted_after_preemption_runs():
    """Kueue sets Evicted back to False when it reserves quota again."""
    was = {"type": "Evicted", "status": "False", "reason": "QuotaReserved", "message": f"Previously: {_PREEMPTED}"}
    ready = {"type": "PodsReady", "status": "True", "reason": "PodsReady", "message": "All pods reached readiness"}
    state, _, _ = kueue_state(_RUNNING_JOB, _admitted_wl(was, ready))
    assert state == JobState.RUNNING


def test_a_preempted_job_admitted_again_is_charged_for_both_runs(kueue):
    job_id = kueue.submit("wl-9")
    kueue.step()
    kueue.emu.advance(100)
    kueue.emu.kueue.evict(job_id)
    kueue.emu.advance(30)  # waiting again: not charged
    kueue.step()
    kueue.emu.advance(50)
    kueue.finish(job_id)
    [record] = list(kueue.backend.usage(datetime(2000, 1, 1, tzinfo=timezone.utc)))
    assert record.gpu_seconds == record.gpus * (100 + 50)
