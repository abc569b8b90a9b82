"""The stack as a site runs it (docker-compose.yml unchanged, every image from Debian's
archive), used through its reverse proxy: a researcher signs in and submits, the broker places
the job on the real Slurm cluster and dispatches it once, it runs and completes there, finance
sees its chargeback row, and Prometheus can scrape /metrics."""

from __future__ import annotations

import re
import time

import pytest
import requests

from tests.ops.stack.compose import run

pytestmark = pytest.mark.stack


def _sacct(job_id: str) -> list[str]:
    out = run(["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "State,AllocTRES,ElapsedRaw"], timeout=30).stdout
    return out.strip().split("|")


def test_a_job_submitted_through_the_proxy_runs_once_on_slurm_and_is_charged(stack, researcher, finance):
    person, project = researcher
    # 4 GPUs for 12 s: 0.013 GPU-hours, above the chargeback's rounding to hundredths
    wid = person.submit(project, "smoke-1", seconds=12, gpus=4)

    done = person.wait_state(wid, {"completed", "failed", "cancelled", "rejected"}, timeout=240)
    assert done["state"] == "completed", done
    assert "running" in done["states_seen"], done["states_seen"]
    sent = person.sent_attempts(wid)
    assert len(sent) == 1 and sent[0]["cluster"] == stack.cluster, sent
    state, tres, elapsed = _sacct(sent[0]["destination_job_id"])
    assert state == "COMPLETED" and "gres/gpu=4" in tres, (state, tres)

    # the row of this person's project and this person (other jobs of the Slurm account this
    # month are the project's too, charged to the cluster user they ran as)
    deadline, mine = time.monotonic() + 120, []
    while time.monotonic() < deadline:
        rows = finance.get("/api/v1/chargeback/", params={"tenant": "stack-t0", "project": "stack-p0"}).json()["rows"]
        mine = [r for r in rows if r["user"] == person.username]
        if mine:
            break
        time.sleep(3)
    assert len(mine) == 1, f"no chargeback row for {person.username} within 120 s of the job's end"
    assert mine[0]["gpu_hours"] == round(4 * int(elapsed) / 3600, 2) == mine[0]["onprem_gpu_hours"], (mine, elapsed)


def test_pages_come_with_their_stylesheet_through_the_proxy(stack, researcher):
    """Debug is off in the stack: WhiteNoise serves the static files collected into the image."""
    person, _ = researcher
    page = person.get("/workloads/")
    assert page.status_code == 200
    css = re.search(r'href="(/static/portal/site[^"]*\.css)"', page.text)
    assert css, page.text[:500]
    served = person.get(css.group(1))
    assert served.status_code == 200 and "text/css" in served.headers["Content-Type"], served.status_code


def test_metrics_are_scraped_through_the_proxy_with_the_token_only(stack):
    assert stack.scrape(token=False).status_code == 403  # the proxy is not an allowed address
    r = stack.scrape()
    assert r.status_code == 200, r.text[:300]
    names = {line.split("{")[0].split(" ")[0] for line in r.text.splitlines() if line and not line.startswith("#")}
    for name in ("gpubroker_reconcile_lag_seconds", "gpubroker_celery_queue_depth", "gpubroker_inventory_age_seconds"):
        assert name in names, f"{name} missing from /metrics"


def test_both_web_processes_serve_behind_the_proxy(stack):
    """With either web process stopped the proxy still answers; the site is down for nobody."""
    for down in ("web-1", "web-2"):
        stack.stop(down)
        try:
            ok = [requests.get(f"{stack.url}/healthz", verify=stack.cert, timeout=10).status_code for _ in range(6)]
        finally:
            stack.start(down)
            stack.wait_serving(down)  # before the other one stops
        assert ok == [200] * 6, (down, ok)


def test_a_second_beat_started_by_mistake_schedules_nothing(stack):
    """Two beats would send every periodic task twice: the second one, a process of its own
    beside the stack's beat, finds the lease held, says whose it is and sends nothing."""
    since = time.time()
    second = run(["podman", "exec", stack.container("beat"), "timeout", "25", "celery", "-A", "config", "beat",
                  "-l", "info", "--schedule", "/tmp/second-beat-schedule"], check=False, timeout=60)
    said = second.stdout + second.stderr
    assert "another beat holds the schedule" in said, said[-2000:]
    assert "Sending due task" not in said, said[-2000:]
    assert "Sending due task" in stack.logs("beat", since=since)  # the stack's own beat carried on
