"""Backup and restore drill (docs/operations.md, "Backup and restore"), on PostgreSQL.

The broker runs (in this process, on the test database, tasks worked by the test) against
simulated clusters on a manual clock: November's jobs end and their usage is collected, so
November is a closed month with chargeback.  In December some workloads run, some are placed
but not yet sent, one is half-dispatched (its attempt written, the process died before the
call).  ``pg_dump`` (the real binary, custom format) is started; once it holds its snapshot
(its lock on the workload table) the broker carries on while the dump runs: it sends the
placed ones, retries the half-dispatched one, takes two new submissions and sends them, and
sees jobs end.  The dump is restored with ``pg_restore`` into a fresh database and the broker
is started on it in a process of its own (tests/ops/restore_drill.py: ``migrate``,
``after_restore``, then the beat's passes), with the clusters' state handed over as JSON:
the clusters outlive the database, so they keep every job sent after the backup.

Shown: every workload of the backup is there and ends with exactly one job at the clusters
(those sent after the backup adopted by workload id, none sent twice); the closed month's
chargeback export is byte for byte what it was; the jobs of the two workloads submitted after
the backup, which the restored database has never heard of, are charged once, to their
project by the cluster account, and the one still running is escalated as an orphan job
(its GPUs stay counted as busy until an admin decides), never cancelled.
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import pytest
from django.db import connection

from broker import runtime
from broker.faults import Crash
from broker.models import Cluster, Quota, Workload
from tests.ops.restore_drill import CLUSTERS, closed_month_csv, fleet_state, load_fleet
from tests.ops import restore_drill
from tests.support.worker import ROOT, database_url_for_tests

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

DUMP_TIMEOUT_S = 120
BROKER_TIMEOUT_S = 300
DECEMBER = datetime(2026, 12, 1, 0, 10, tzinfo=timezone.utc)


@pytest.fixture
def tools():
    missing = [t for t in ("pg_dump", "pg_restore") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"needs PostgreSQL's client programs on PATH: {missing}")


@pytest.fixture
def restored_url():
    """A fresh database for the restore, next to the test database; dropped afterwards."""
    name = f"{connection.settings_dict['NAME']}_restored"
    with connection.cursor() as cur:
        cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        cur.execute(f'CREATE DATABASE "{name}"')
    yield database_url_for_tests().rsplit("/", 1)[0] + f"/{name}"
    with connection.cursor() as cur:
        cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class Broker:
    """The broker in this process: its clock is the fleet's, the test works its tasks."""

    def __init__(self, fleet, member, project):
        self.fleet, self.member, self.project = fleet, member, project

    def sync(self) -> None:
        from broker.services.fleet.inventory import cluster_sync_inventory

        for cluster in Cluster.objects.all():
            cluster_sync_inventory(cluster_id=cluster.id)

    def advance(self, seconds: float) -> None:
        self.fleet.advance(seconds)
        self.sync()  # the clusters stay fresh (the beat's inventory pass)

    def submit(self, name: str, minutes: int) -> Workload:
        from broker.services.submitting.workloads import workload_submit

        return workload_submit(user=self.member, project_id=self.project.id, spec_data={
            "name": name, "command": "python train.py", "gpu_class": "a100-80gb", "gpus_per_worker": 2,
            "workers": 1, "time_limit_minutes": minutes})  # the simulator runs half the limit

    def place(self, workload: Workload) -> Workload:
        from broker.services.placing.cycle import workload_place

        placed = workload_place(workload_id=workload.id)
        assert placed.state == "reserved", placed.state
        return placed

    def dispatch(self, workload: Workload) -> Workload:
        from broker.services.dispatching.send import workload_dispatch

        return workload_dispatch(workload_id=workload.id)

    def poll(self) -> None:
        from broker.services.following.status import cluster_poll_status

        for cluster in Cluster.objects.all():
            cluster_poll_status(cluster_id=cluster.id)

    def collect_usage(self) -> None:
        from accounting.services.usage import usage_collect

        for cluster in Cluster.objects.all():
            assert not usage_collect(cluster_id=cluster.id).stale


@pytest.fixture
def broker(trio, tools):
    from broker.faults.install import captured_tasks
    from broker.services.fleet.registration import gpu_classes_from_policy

    fleet = restore_drill.build_fleet()
    gpu_class = {c.slug: c for c in gpu_classes_from_policy()}["a100-80gb"]
    Quota.objects.create(tenant=trio.tenant, gpu_class=gpu_class, limit_gpus=32)
    queue: list = []
    with runtime.override(now=fleet.clock.now), captured_tasks(queue):  # tasks: the test works them
        for name, price in CLUSTERS.items():
            Cluster.objects.create(name=name, kind="simulator", region="eu-west", location="onprem",
                                   price_per_gpu_hour=Decimal(price), config={"image_pull_s": 0})
        b = Broker(fleet, trio.member, trio.project)
        b.sync()
        yield b


def _crash_after_attempt_written(name: str) -> None:
    raise Crash(name)


def _half_dispatch(broker: Broker, workload: Workload) -> None:
    """Its attempt row committed, the process dies before calling the cluster."""
    with runtime.override(failpoints={"dispatch.after_attempt_written": _crash_after_attempt_written}):
        with pytest.raises(Crash):
            broker.dispatch(workload)


def _dump_started(dump: Path) -> subprocess.Popen:
    """pg_dump of the live database; returns once it holds its snapshot (it locks every table
    it dumps inside its one repeatable-read transaction): what commits from then on is not in it."""
    proc = subprocess.Popen(["pg_dump", "--format=custom", f"--file={dump}", f"--dbname={database_url_for_tests()}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + DUMP_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None:
        with connection.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                        "WHERE a.application_name = 'pg_dump' AND l.relation = %s::regclass",
                        [Workload._meta.db_table])
            if cur.fetchone():
                return proc
        time.sleep(0.01)
    out, err = proc.communicate(timeout=DUMP_TIMEOUT_S)
    assert proc.returncode == 0, err.decode()
    raise AssertionError("pg_dump ended before the drill saw it hold its snapshot: the database is too small "
                         "to catch it at work; the drill cannot say what the backup holds")


def _restore(dump: Path, url: str) -> None:
    subprocess.run(["pg_restore", "--no-owner", "--exit-on-error", f"--dbname={url}", str(dump)],
                   check=True, capture_output=True, timeout=DUMP_TIMEOUT_S)


def _start_restored_broker(url: str, clusters: dict, folder: Path) -> dict:
    (folder / "clusters.json").write_text(json.dumps(clusters))
    env = {**os.environ, "DATABASE_URL": url, "CELERY_BROKER_URL": "", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "tests.ops.restore_drill", str(folder / "clusters.json"),
                           str(folder / "result.json")], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=BROKER_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads((folder / "result.json").read_text())


def _jobs_per_workload(clusters: dict) -> dict[str, list[tuple[str, str]]]:
    fleet = load_fleet(clusters)
    jobs: dict[str, list[tuple[str, str]]] = {}
    for name in fleet.names():
        for job in fleet.get(name).jobs():
            jobs.setdefault(job.workload_id, []).append((name, job.job_id))
    return jobs


def test_restored_broker_adopts_jobs_sent_after_the_backup_and_keeps_closed_month_chargeback(broker, tmp_path,
                                                                                              restored_url):
    # November: two jobs run an hour each and are charged; the month closes
    november = [broker.submit(f"nov-{i}", minutes=120) for i in range(2)]
    for w in november:
        broker.dispatch(broker.place(w))
    broker.advance(2 * 3600)
    broker.poll()
    broker.advance((DECEMBER - broker.fleet.clock.now()).total_seconds())
    broker.collect_usage()
    chargeback_before = closed_month_csv()
    assert chargeback_before.count(b"\n") == 3, chargeback_before  # header, one row, the total

    # December, at the backup: two running, two placed and not yet sent, one half-dispatched
    running = [broker.dispatch(broker.place(broker.submit(f"run-{i}", minutes=m))) for i, m in enumerate((60, 1440))]
    placed = [broker.place(broker.submit(f"placed-{i}", minutes=1440)) for i in range(2)]
    half = broker.place(broker.submit("half", minutes=1440))
    _half_dispatch(broker, half)
    in_backup = {w.uid: w for w in [*november, *running, *placed, half]}

    dump = tmp_path / "gpubroker.dump"
    pg_dump = _dump_started(dump)
    # the broker carries on while the dump runs
    broker.advance(60)                                   # past the half-dispatched attempt's lease
    for w in [*placed, half]:
        assert broker.dispatch(w).state == "queued"
    after_backup = [broker.dispatch(broker.place(broker.submit(f"new-{i}", minutes=m)))
                    for i, m in enumerate((20, 1440))]
    broker.advance(40 * 60)
    broker.poll()                                        # run-0 and new-0 end
    _, err = pg_dump.communicate(timeout=DUMP_TIMEOUT_S)
    assert pg_dump.returncode == 0, err.decode()
    assert Workload.objects.get(id=running[0].id).state == "completed"
    clusters = fleet_state(broker.fleet)
    assert all(len(j) == 1 for j in _jobs_per_workload(clusters).values())

    _restore(dump, restored_url)
    result = _start_restored_broker(restored_url, clusters, tmp_path)

    workloads, jobs = result["workloads"], _jobs_per_workload(result["clusters"])
    assert set(workloads) == set(in_backup)                       # nothing of the backup lost
    duplicated = {uid: j for uid, j in jobs.items() if len(j) != 1}
    assert duplicated == {}
    for w in in_backup.values():
        assert [j for _, j in jobs[w.uid]] == [workloads[w.uid]["job"]], (w.name, workloads[w.uid])
    adopted = {uid for uid, w in workloads.items() if "adopted" in w["attempts"]}
    assert adopted == {w.uid for w in [*placed, half]}
    assert {workloads[w.uid]["state"] for w in [*placed, half]} == {"running"}
    assert workloads[running[0].uid]["state"] == "completed" and workloads[running[1].uid]["state"] == "running"
    assert result["after_restore"].startswith("3 workload(s)")
    assert result["reconcile_errors"] == []

    assert base64.b64decode(result["closed_month_csv"]) == chargeback_before

    # the jobs of the workloads submitted after the backup: charged once, the live one escalated
    unknown = {w.uid for w in after_backup}
    charged = [u for u in result["usage"] if u["job_id"] in {j for uid in unknown for _, j in jobs[uid]}]
    assert sorted(u["job_id"] for u in charged) == sorted(j for uid in unknown for _, j in jobs[uid])
    assert {u["workload__uid"] for u in charged} == {None}
    assert {u["project__slug"] for u in charged} == {"lattice"}
    orphans = [e for e in result["escalations"] if e["kind"] == "orphan_job"]
    assert [(e["workload_id"], e["state"]) for e in orphans] == [(after_backup[1].uid, "open")]
    fleet = load_fleet(result["clusters"])
    assert {fleet.get(c).job(j).state.value for uid in unknown for c, j in jobs[uid]} == {"completed", "running"}
