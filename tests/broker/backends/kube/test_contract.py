"""The backend contract, once for Kueue and once for Volcano, against the emulator."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from broker.backends.base import Backend, JobState, Reason, Rejected, Unavailable

EPOCH = datetime(2000, 1, 1, tzinfo=timezone.utc)


def test_is_a_backend(harness):
    assert isinstance(harness.backend, Backend)
    assert harness.backend.kind == harness.kind


def test_submit_creates_one_labelled_job(harness):
    job_id = harness.submit("wl-0001")
    assert job_id == "team/wl-0001-train"
    [obj] = harness.job_objects()
    assert obj["metadata"]["labels"]["gpubroker.io/workload-id"] == "wl-0001"
    found = harness.backend.find("wl-0001")
    assert found is not None and found.job_id == job_id and found.workload_id == "wl-0001"
    assert found.state == JobState.PENDING and found.gpus == 1


def test_find_unknown_workload_is_none(harness):
    harness.submit("wl-0001")
    assert harness.backend.find("wl-9999") is None


@pytest.mark.parametrize("fault", ["lost_reply", "slow"])
def test_lost_reply_then_find_and_resubmit_adopts(harness, fault):
    harness.emu.set_fault(fault, times=1, methods=("POST",))
    with pytest.raises(Unavailable):
        harness.submit("wl-0002")
    found = harness.backend.find("wl-0002")  # the create did happen
    assert found is not None
    again = harness.submit("wl-0002")         # 409 -> adopt, never a second job
    assert again == found.job_id
    assert len(harness.job_objects()) == 1
    posts = [p for m, p in harness.emu.requests if m == "POST"]
    assert len(posts) == 2


def test_name_taken_by_another_workload_is_rejected(harness, spec_factory):
    harness.submit("wl-0003")
    obj = harness.job_objects()[0]
    obj["metadata"]["labels"]["gpubroker.io/workload-id"] = "someone-else"
    obj["metadata"]["annotations"]["gpubroker.io/workload-id"] = "someone-else"
    with pytest.raises(Rejected, match="already exists"):
        harness.submit("wl-0003")
    assert len(harness.job_objects()) == 1


def test_admitted_running_finished(harness):
    job_id = harness.submit("wl-0004", gpus_per_worker=2, workers=2)
    assert harness.backend.status([job_id])[job_id].state == JobState.PENDING
    harness.step()
    running = harness.backend.status([job_id])[job_id]
    assert running.state == JobState.RUNNING and running.reason == Reason.NONE
    assert running.started_at is not None and running.gpus == 4
    assert set(running.nodes) <= {"gpu-a", "gpu-b"} and running.nodes
    assert [j.job_id for j in harness.backend.active_jobs()] == [job_id]
    harness.emu.advance(1800)
    harness.finish(job_id)
    done = harness.backend.status([job_id])[job_id]
    assert done.state == JobState.COMPLETED and done.ended_at is not None
    assert harness.backend.active_jobs() == []
    [record] = list(harness.backend.usage(EPOCH))
    assert record.source == harness.kind and record.gpus == 4
    assert record.gpu_seconds == 4 * 1800 and record.workload_id == "wl-0004"
    assert record.account == "team" and record.gpu_model == "NVIDIA-A100-SXM4-80GB"


def test_failed_job(harness):
    job_id = harness.submit("wl-0005")
    harness.step()
    harness.finish(job_id, ok=False)
    assert harness.backend.status([job_id])[job_id].state == JobState.FAILED


def test_usage_since_skips_older_jobs(harness):
    job_id = harness.submit("wl-0006")
    harness.step()
    harness.finish(job_id)
    assert list(harness.backend.usage(datetime(2999, 1, 1, tzinfo=timezone.utc))) == []


def test_cancel_confirmed_by_404(harness):
    job_id = harness.submit("wl-0007")
    harness.step()
    assert harness.backend.cancel(job_id) is True
    assert harness.backend.status([job_id]) == {}
    assert harness.job_objects() == []
    assert harness.emu.store.list(("", "pods")) == []  # cascaded to the pods
    assert harness.backend.cancel(job_id) is True        # idempotent


def test_cancel_not_confirmed_while_foreground_deletion_runs(harness):
    job_id = harness.submit("wl-0008")
    harness.step()
    harness.emu.store.foreground_linger = True
    assert harness.backend.cancel(job_id) is False
    assert "deletion in progress" in harness.backend.status([job_id])[job_id].raw_reason
    harness.emu.store.finalize_deletions()
    assert harness.backend.cancel(job_id) is True


def test_status_omits_vanished_jobs(harness):
    job_id = harness.submit("wl-0009")
    assert set(harness.backend.status([job_id, "team/gone"])) == {job_id}


@pytest.mark.parametrize("call", ["submit", "find", "status", "inventory", "cancel", "usage"])
def test_http_500_is_unavailable(harness, call):
    job_id = harness.submit("wl-0010")
    harness.emu.set_fault("error500")
    with pytest.raises(Unavailable):
        _invoke(harness, call, job_id)


@pytest.mark.parametrize("call", ["submit", "find", "status", "inventory", "cancel"])
def test_connection_refused_is_unavailable(harness, call):
    job_id = harness.submit("wl-0011")
    harness.emu.set_fault("refuse")
    try:
        with pytest.raises(Unavailable):
            _invoke(harness, call, job_id)
    finally:
        harness.emu.set_fault(None)
    assert harness.backend.find("wl-0011") is not None  # back after the outage


def test_read_timeout_is_unavailable(harness):
    harness.emu.set_fault("slow", methods=("GET",))
    with pytest.raises(Unavailable):
        harness.backend.inventory()


def test_inventory_pools(harness):
    job_id = harness.submit("wl-0012", gpus_per_worker=3)
    harness.step()
    snap = harness.backend.inventory()
    assert snap.cluster == "k8s-1" and snap.taken_at.tzinfo is not None
    whole = [p for p in snap.pools if p.partitioning == "whole"]
    assert sum(p.gpus_total for p in whole) == 8
    assert sum(p.gpus_allocated for p in whole) == 3
    assert sum(p.gpus_free for p in whole) == 5
    mig = [p for p in snap.pools if p.partitioning == "1g.10gb"]
    assert mig and mig[0].gpus_total == 7 and mig[0].gpu_memory_gb == 10
    assert all(p.owner == harness.kind for p in snap.pools)
    assert harness.backend.status([job_id])[job_id].state == JobState.RUNNING


@pytest.mark.parametrize("harness", ["kueue"], indirect=True)
def test_kueue_quota_in_use_is_capacity(harness):
    first = harness.submit("wl-1", gpus_per_worker=4, workers=2)   # takes all 8
    second = harness.submit("wl-2", gpus_per_worker=4)
    harness.step()
    states = harness.backend.status([first, second])
    assert states[first].state == JobState.RUNNING
    waiting = states[second]
    assert waiting.state == JobState.PENDING and waiting.reason == Reason.CAPACITY
    assert waiting.raw_reason == ("couldn't assign flavors to pod set main: insufficient unused "
                                  "quota for nvidia.com/gpu in flavor a100, 4 more needed")
    assert harness.backend.inventory().queue.pending_jobs == 1
    assert harness.backend.inventory().queue.pending_gpus == 4
    harness.finish(first)
    harness.step()
    assert harness.backend.status([second])[second].state == JobState.RUNNING


@pytest.mark.parametrize("harness", ["kueue"], indirect=True)
def test_kueue_above_maximum_capacity_is_policy(harness):
    job_id = harness.submit("wl-3", gpus_per_worker=8, workers=2)  # 16 > quota 8
    harness.step()
    job = harness.backend.status([job_id])[job_id]
    assert job.state == JobState.PENDING and job.reason == Reason.POLICY
    assert "> maximum capacity (8)" in job.raw_reason
    assert job.raw_reason.startswith("couldn't assign flavors to pod set main: insufficient "
                                     "quota for nvidia.com/gpu in flavor a100")


@pytest.mark.parametrize("harness", ["volcano"], indirect=True)
def test_volcano_gang_with_room_for_three_of_four_is_gang(harness):
    harness.emu.add_node("gpu-c", gpus=4)
    blocker = harness.submit("wl-b", gpus_per_worker=4, workers=2)   # gpu-a and gpu-b
    harness.step()
    gang = harness.submit("wl-g", gpus_per_worker=1, workers=4)
    harness.emu.store.get(("", "nodes"), "", "gpu-c")["status"]["allocatable"][
        "nvidia.com/gpu"] = "3"  # room for 3 of the 4 members
    harness.step()
    job = harness.backend.status([gang])[gang]
    assert job.state == JobState.PENDING and job.reason == Reason.GANG
    assert job.raw_reason == ("4/4 tasks in gang unschedulable: pod group is not ready, "
                              "4 Pending, 4 minAvailable; Pending: 1 Unschedulable, "
                              "3 Schedulable")
    assert not [p for p in harness.emu.store.list(("", "pods"))
                if p["metadata"]["labels"]["volcano.sh/job-name"] == "wl-g-train"]
    harness.finish(blocker)
    harness.step()
    assert harness.backend.status([gang])[gang].state == JobState.RUNNING


@pytest.mark.parametrize("harness", ["volcano"], indirect=True)
def test_volcano_gang_with_no_room_is_capacity(harness):
    job_id = harness.submit("wl-big", gpus_per_worker=8, workers=2)  # no node has 8
    harness.step()
    job = harness.backend.status([job_id])[job_id]
    assert job.reason == Reason.CAPACITY
    assert "Pending: 2 Unschedulable" in job.raw_reason
    stats = harness.backend.inventory().queue
    assert stats.pending_jobs == 1 and stats.pending_gpus == 16


def _invoke(harness, call: str, job_id: str):
    backend = harness.backend
    if call == "submit":
        return harness.submit("wl-other")
    if call == "find":
        return backend.find("wl-0010")
    if call == "status":
        return backend.status([job_id])
    if call == "inventory":
        return backend.inventory()
    if call == "cancel":
        return backend.cancel(job_id)
    return list(backend.usage(EPOCH))
