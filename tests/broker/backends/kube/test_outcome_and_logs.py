"""Kueue and Volcano jobs: how each worker ended (a pod OOMKilled on worker 1), and each
worker's pod log, through the official client against the API emulator."""
from __future__ import annotations

import pytest

from broker.backends.base import JobState, LogsGone
from broker.backends.kube.pods import job_outcome
from tests.broker.backends.kube.emu.emulator_pods import terminate_pod


def _pods(harness, job_id: str) -> dict[str, dict]:
    name = job_id.split("/")[1]
    return {p["metadata"]["name"]: p for p in harness.emu.store.list(("", "pods"))
            if name in p["metadata"]["name"]}


def test_a_pod_killed_for_memory_is_out_of_memory_on_its_worker(harness):
    job_id = harness.submit("wl-oom", gpus_per_worker=1, workers=3)
    harness.step()
    pods = sorted(_pods(harness, job_id).values(), key=lambda p: p["metadata"]["name"])
    terminate_pod(pods[1], "OOMKilled", 137)  # worker 1's container, killed by the kernel
    harness.finish(job_id, ok=False)

    done = harness.backend.status([job_id])[job_id]
    assert done.state == JobState.FAILED and done.outcome is not None
    assert done.outcome.end_reason == "OOMKilled" and done.outcome.worker == "1"
    assert done.outcome.summary.startswith("ran out of memory on worker 1 (node ")


def test_a_clean_end_exits_0_and_a_failed_worker_is_named(harness):
    ok = harness.submit("wl-ok")
    harness.step()
    harness.finish(ok)
    assert harness.backend.status([ok])[ok].outcome.summary == "exited with code 0"
    pods = [{"metadata": {"name": f"j-{i}"}, "status": {"containerStatuses": [
        {"state": {"terminated": {"exitCode": 3 if i == 2 else 0, "reason": "Error"}}}]}} for i in range(3)]
    failed = job_outcome(pods, "BackoffLimitExceeded")
    assert (failed.summary, failed.worker, failed.exit_code) == ("worker 2 exited with code 3", "2", 3)
    assert job_outcome([], "DeadlineExceeded").summary == "stopped at its time limit (DeadlineExceeded)"


def test_each_workers_log_is_tailed_and_paged_and_a_gone_pod_says_so(harness):
    job_id = harness.submit("wl-logs", gpus_per_worker=1, workers=2)
    harness.step()
    namespace = job_id.split("/")[0]
    for name in _pods(harness, job_id):
        harness.emu.pod_logs[(namespace, name)] = "".join(f"{name} line {i}\n" for i in range(1, 11))

    tail = harness.backend.logs(job_id, worker="1", tail=3)
    assert tail.workers == ("0", "1") and tail.offset == 7 and tail.lines[-1].endswith("-1 line 10")
    page = harness.backend.logs(job_id, offset=0, limit=4)
    assert page.worker == "0" and page.more and page.lines[0].endswith("-0 line 1")
    with pytest.raises(LogsGone):
        harness.backend.logs(job_id, worker="5", tail=3)
    for name in _pods(harness, job_id):
        harness.emu.store.delete(("", "pods"), namespace, name, "Background")
    with pytest.raises(LogsGone):
        harness.backend.logs(job_id, tail=3)
