"""Faults under load and a broker outage, on the compose stack against the real Slurm cluster.

Kills under load: researchers submit, poll, list and cancel through the proxy while a worker is
killed (-9) in the middle of a dispatch chunk, Redis and PostgreSQL are restarted and a web
process is killed; afterwards nothing acknowledged is lost, no workload has two jobs on Slurm,
and every fault-harness invariant is 0 (tests/ops/stack/watch.py).

The broker-outage contract: every broker process (both web processes, both workers, beat) is
stopped while jobs run on Slurm; the jobs carry on; on restart the broker records their ends
and charges them, and the reconciliation lag it shows on /fleet/ and in /metrics covers the
outage until the first pass.

Sizes: GPUBROKER_STACK_RESEARCHERS (10), GPUBROKER_STACK_LOAD_S (90), GPUBROKER_STACK_OUTAGE_S
(60); docs/reliability.md gives the larger run. Results go to test-artifacts/stack-*.json."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.ops.stack.client import Person
from tests.ops.stack.compose import ROOT, STACK_MADE, run
from tests.ops.stack.conftest import INTERVALS
from tests.ops.stack.load import Researcher

pytestmark = pytest.mark.stack

LOAD_S = float(os.environ.get("GPUBROKER_STACK_LOAD_S", "90"))
OUTAGE_S = float(os.environ.get("GPUBROKER_STACK_OUTAGE_S", "60"))
USAGE_INTERVAL_S = int(INTERVALS["GPUBROKER_USAGE_INTERVAL_S"])
TERMINAL = {"completed", "failed", "cancelled", "rejected"}
ARTIFACTS = ROOT / "test-artifacts"


def stack_commit() -> tuple[str, bool]:
    """The commit the stack was brought up at (read once per session, when it came up)."""
    return STACK_MADE["commit"], STACK_MADE["tree_differs"]


def _write(name: str, result: dict) -> None:
    """The result with what produced it: the commit (and whether the tree differed) and sizes."""
    commit, dirty = stack_commit()
    sizes = {k: os.environ[k] for k in ("GPUBROKER_STACK_RESEARCHERS", "GPUBROKER_STACK_LOAD_S",
                                        "GPUBROKER_STACK_OUTAGE_S") if k in os.environ}
    slurm = run(["sinfo", "--version"], check=False).stdout.strip()
    ARTIFACTS.mkdir(exist_ok=True)
    made = {"commit": commit, "tree_differs": dirty, "arguments": sizes, "slurm": slurm,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    (ARTIFACTS / name).write_text(json.dumps({**made, **result}, indent=1))


def _chunk_in_flight(stack, since: float) -> str | None:
    """A worker in the middle of a dispatch chunk: it logged the chunk received, not finished."""
    for worker in ("worker-1", "worker-2"):
        logs = stack.logs(worker, since=since)
        got = set(re.findall(r"dispatch_workloads\[([0-9a-f-]+)\] received", logs))
        done = set(re.findall(r"dispatch_workloads\[([0-9a-f-]+)\] (?:succeeded|raised|retry)", logs))
        if got - done:
            return worker
    return None


def _kill_a_worker_mid_chunk(stack, timeout: float = 30) -> dict:
    t0 = time.time()
    while time.time() - t0 < timeout:
        worker = _chunk_in_flight(stack, since=t0 - 5)
        if worker:
            stack.kill(worker)
            return {"worker": worker, "mid_chunk": True}
        time.sleep(0.2)
    stack.kill("worker-1")  # no chunk seen in flight in time: killed anyway, said so
    return {"worker": "worker-1", "mid_chunk": False}


class Watcher:
    def __init__(self, stack):
        self.stop_file = tempfile.mktemp(prefix="gpubroker-watch-stop-")
        self.out = tempfile.mktemp(prefix="gpubroker-watch-", suffix=".json")
        env = {**os.environ, "DATABASE_URL": stack.db_url(), "PYTHONPATH": str(ROOT), "CELERY_BROKER_URL": "",
               "GPUBROKER_ENABLE_SIMULATOR": "false"}
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.ops.stack.watch", "--cluster", stack.cluster,
                                      "--stop", self.stop_file, "--out", self.out,
                                      "--db-container", stack.container("db")], cwd=ROOT, env=env)

    def finish(self) -> dict:
        Path(self.stop_file).touch()
        self.proc.wait(timeout=300)
        return json.loads(Path(self.out).read_text())


def _drain(person: Person, ids: list[int], timeout: float) -> dict[int, str]:
    deadline, states = time.monotonic() + timeout, {}
    while time.monotonic() < deadline:
        for wid in ids:
            if states.get(wid) not in TERMINAL:
                r = person.get(f"/api/v1/workloads/{wid}/")
                states[wid] = r.json()["state"] if r.status_code == 200 else f"http {r.status_code}"
        if all(s in TERMINAL for s in states.values()):
            break
        time.sleep(3)
    return states


def test_kills_under_load_lose_nothing_and_run_nothing_twice(stack):
    watcher = Watcher(stack)
    until = time.time() + LOAD_S
    researchers = [Researcher(stack.url, stack.cert, name, password, stack.projects[name], until, seed=n)
                   for n, (name, password) in enumerate(stack.people)]
    for r in researchers:
        r.start()
    faults = []
    time.sleep(LOAD_S * 0.15)
    faults.append({"fault": "worker killed (-9)", **_kill_a_worker_mid_chunk(stack)})
    time.sleep(5)
    stack.start(faults[-1]["worker"])
    time.sleep(LOAD_S * 0.15)
    stack.restart("redis")
    faults.append({"fault": "redis restarted"})
    time.sleep(LOAD_S * 0.15)
    stack.restart("db")
    faults.append({"fault": "postgres restarted"})
    time.sleep(LOAD_S * 0.15)
    stack.kill("web-2")
    faults.append({"fault": "web-2 killed (-9)"})
    time.sleep(5)
    stack.start("web-2")
    for r in researchers:
        r.join(timeout=LOAD_S + 600)
    acked = {name: wid for r in researchers for name, wid in r.acked.items()}
    finance = Person(stack.url, *stack.staff, cert=stack.cert)
    states = _drain(finance, sorted(acked.values()), timeout=max(600, LOAD_S * 10))
    counts = watcher.finish()
    in_db = [wid for wid, s in states.items() if not s.startswith("http")]
    result = {
        "researchers": len(researchers), "load_s": LOAD_S, "faults": faults, "events": stack.events,
        "requests": sum(r.requests for r in researchers),
        "failed_requests_retried": sum(len(r.failures) for r in researchers),
        "acknowledged": len(acked), "unanswered_submissions": sum(len(r.unanswered) for r in researchers),
        "in_database": len(in_db), "lost": len(acked) - len(in_db),
        "states": {s: list(states.values()).count(s) for s in sorted(set(states.values()))},
        "restarted_by_the_engine": {k: v for k, v in stack.restart_counts().items() if v},
        **counts,
    }
    _write("stack-kills.json", result)
    assert acked, "no submission was acknowledged"
    assert result["lost"] == 0, result
    assert all(s in TERMINAL for s in states.values()), result["states"]
    assert counts["counts"]["duplicate_destination_jobs"] == 0, counts
    assert all(v == 0 for v in counts["counts"].values()), counts


def _metric(stack, name: str) -> float | None:
    m = re.search(rf"^{name} ([0-9.e+-]+)$", stack.scrape().text, re.M)
    return float(m.group(1)) if m else None


def _charged(finance: Person, user: str) -> float:
    """The user's GPU-hours on the chargeback report, every GPU class together."""
    rows = finance.get("/api/v1/chargeback/", params={"tenant": "stack-t0", "project": "stack-p0"}).json()["rows"]
    return sum(float(r["gpu_hours"]) for r in rows if r["user"] == user)


def _job_ids(person: Person, ids: list[int]) -> set[str]:
    return {a["destination_job_id"] for wid in ids for a in person.sent_attempts(wid)}


def test_a_broker_outage_leaves_jobs_running_and_the_broker_catches_up(stack):
    name, password = stack.quiet  # charged for these four jobs and nothing else
    person = Person(stack.url, name, password, cert=stack.cert)
    run_s = int(OUTAGE_S * 0.5) + 10
    ids = [person.submit(stack.projects[name], f"outage-{i}", seconds=run_s, gpus=2) for i in range(4)]
    for wid in ids:
        person.wait_state(wid, {"running"}, timeout=180)
    job_ids = _job_ids(person, ids)
    assert len(job_ids) == len(ids), job_ids
    stack.stop("web-1", "web-2", "worker-1", "worker-2", "beat")  # every broker process
    t_stop = time.time()
    ended_on_slurm = None
    while time.time() - t_stop < OUTAGE_S:
        queue = set(run(["squeue", "-h", "-o", "%i"], check=False, timeout=30).stdout.split())
        if ended_on_slurm is None and not queue & job_ids:
            ended_on_slurm = round(time.time() - t_stop, 1)
        time.sleep(2)
    # back in the order an operator would: the web processes first (what does the portal say?),
    # then the workers and beat, which catch up
    stack.start("web-1", "web-2")
    stack.wait_serving("web-1", "web-2")
    lag_at_restart = _metric(stack, "gpubroker_reconcile_lag_seconds")
    fleet = Person(stack.url, *stack.staff, cert=stack.cert).get("/fleet/").text
    shown = re.search(r"(\d+) s since the last pass", fleet)
    stack.start("worker-1", "worker-2", "beat")
    t_start = time.time()
    states = _drain(person, ids, timeout=300)
    ends_recorded_s = round(time.time() - t_start, 1)
    finance = Person(stack.url, *stack.staff, cert=stack.cert)
    expected = 4 * 2 * run_s / 3600  # four jobs of two GPUs for run_s seconds each
    charged_s, charged, caught_up_s, lag_after = None, 0.0, None, None
    # one loop for both: usage is collected job by job, pass by pass; reconciliation runs apart
    while time.time() - t_start < 300 and (charged_s is None or caught_up_s is None):
        if charged_s is None:
            charged = _charged(finance, name)
            if charged >= expected - 0.01:
                charged_s = round(time.time() - t_start, 1)
        if caught_up_s is None:
            lag_after = _metric(stack, "gpubroker_reconcile_lag_seconds")
            if lag_after is not None and lag_after < OUTAGE_S / 2:
                caught_up_s = round(time.time() - t_start, 1)
        time.sleep(1)
    # one more collection pass after the charge was whole: a job charged twice would show now
    time.sleep(max(0.0, (charged_s or 0) + USAGE_INTERVAL_S + 5 - (time.time() - t_start)))
    charged_after_a_pass = _charged(finance, name)
    result = {"outage_s": OUTAGE_S, "jobs": len(ids), "job_s": run_s,
              "jobs_ended_on_slurm_during_outage_after_s": ended_on_slurm,
              "reconcile_lag_before_workers_restart_s": lag_at_restart,
              "reconcile_lag_on_fleet_page_s": int(shown.group(1)) if shown else None,
              "workers_restart_to_first_reconcile_s": caught_up_s,
              "workers_restart_to_ends_recorded_s": ends_recorded_s,
              "workers_restart_to_charged_s": charged_s, "charged_gpu_hours": charged,
              "charged_gpu_hours_a_pass_later": charged_after_a_pass, "expected_gpu_hours": round(expected, 4),
              "reconcile_lag_after_catch_up_s": lag_after, "states": states}
    _write("stack-outage.json", result)
    assert ended_on_slurm is not None, "the jobs did not run to their end on Slurm while the broker was down"
    assert all(s == "completed" for s in states.values()), states
    assert lag_at_restart is not None and lag_at_restart >= OUTAGE_S, result
    assert shown is not None and int(shown.group(1)) >= OUTAGE_S, "/fleet/ does not show the outage's lag"
    assert caught_up_s is not None, result
    # all four charged, each once (to the hundredth the report rounds to, and a second of sacct's rounding)
    assert charged_s is not None and abs(charged - expected) <= 0.015, result
    assert charged_after_a_pass == charged, result
