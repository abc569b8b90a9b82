"""Crashes of real processes: a Celery worker killed mid-task, Redis restarted with tasks in
it, the worker's PostgreSQL connections cut, and the broker outage contract (workers
stopped: jobs carry on, submissions wait; on restart the broker catches up, lag measured).

The destination is the journal (broker/faults/journal.py): simulated clusters in a SQLite
file every process shares, so what reached a destination outlives the worker that sent
it and the test can count jobs per workload there.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from broker.faults import FaultPlan
from broker.faults.install import faulty_backends, terminate_backends
from broker.faults.journal import Journal, journal_builder
from broker.models import AttemptState, DispatchAttempt, Reservation, Workload

from .support import BeatProcess, FaultWorker, redis_restart, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

CLUSTER = "fj-onprem"
TIMEOUT_S = 1.0          # backend timeout here and in the workers: the attempt lease is 2 x 1 + 5 s
ARTIFACTS = Path(settings.BASE_DIR) / "test-artifacts"


@pytest.fixture
def broker_url():
    url = settings.CELERY_BROKER_URL
    if not url.startswith("redis://"):
        pytest.skip("needs CELERY_BROKER_URL=redis://... (a real worker)")
    import redis

    redis.Redis.from_url(url).flushdb()
    return url


@pytest.fixture
def journal(tmp_path) -> Journal:
    j = Journal(str(tmp_path / "journal.sqlite3"))
    j.add_cluster(CLUSTER, nodes=2, gpus_per_node=8, time_scale=60.0)   # 1 min of limit = 0.5 s
    return j


@pytest.fixture
def fleet(db, settings, journal, trio):
    """The test process reaches the same journal cluster as the workers do."""
    from decimal import Decimal

    from broker.models import Cluster, Quota
    from broker.services.fleet.registration import gpu_classes_from_policy
    from broker.services.fleet.inventory import cluster_sync_inventory

    settings.GPUBROKER_BACKEND_TIMEOUT_S = TIMEOUT_S
    gpu_class = {c.slug: c for c in gpu_classes_from_policy()}["a100-80gb"]
    Quota.objects.create(tenant=trio.tenant, gpu_class=gpu_class, limit_gpus=16)
    with faulty_backends(FaultPlan(), {"simulator": journal_builder(journal.path)}):
        cluster = Cluster.objects.create(name=CLUSTER, kind="simulator", region="eu-west", location="onprem",
                                         price_per_gpu_hour=Decimal("1.0"), config={"image_pull_s": 0})
        cluster_sync_inventory(cluster_id=cluster.id)
        yield cluster


@pytest.fixture
def workers(broker_url, journal, tmp_path):
    started: list = []

    def start(pause: str = "", **env) -> FaultWorker:
        worker = FaultWorker(broker_url, tmp_path / f"worker-{len(started)}.log", journal=journal.path,
                             pause=pause, extra_env=env)
        worker.start()
        started.append(worker)
        return worker
    yield start
    for worker in started:
        worker.stop()


def _submit(trio, name: str, minutes: int = 1) -> Workload:
    from broker.services.submitting.workloads import workload_submit

    return workload_submit(user=trio.member, project_id=trio.project.id, spec_data={
        "name": name, "command": "python train.py", "gpu_class": "a100-80gb", "gpus_per_worker": 2,
        "workers": 1, "time_limit_minutes": minutes})


def _jobs(journal: Journal, uid: str) -> list[dict]:
    return [j for j in journal.all_jobs() if j["workload_id"] == uid]


def _state(workload: Workload) -> str:
    return Workload.objects.get(id=workload.id).state


def _after_the_lease() -> None:
    from broker.services.dispatching.send import attempt_lease_s

    time.sleep(attempt_lease_s() + 0.5)


def test_worker_killed_after_the_destination_accepted_leaves_exactly_one_job(fleet, journal, workers, trio):
    from broker.services.following.reconcile import reconcile_fleet

    worker = workers(pause="dispatch.after_submit")
    workload = _submit(trio, "killed-mid-dispatch", minutes=30)
    assert wait_for(lambda: worker.paused, 60), worker.log_path.read_text()[-3000:]
    worker.kill()                                            # SIGKILL: no reply recorded, nothing acked
    assert len(_jobs(journal, workload.uid)) == 1
    assert _state(workload) == "dispatching"
    assert DispatchAttempt.objects.get(workload=workload).state == AttemptState.STARTED

    _after_the_lease()
    reconcile_fleet()                                        # the restarted broker's start-up pass
    workers()                                                # a fresh worker runs the look-up it enqueued
    assert wait_for(lambda: _state(workload) in ("queued", "running"), 60)
    workload.refresh_from_db()
    assert workload.state in ("queued", "running")
    assert [j["job_id"] for j in _jobs(journal, workload.uid)] == [workload.destination_job_id]
    assert Reservation.objects.get(workload=workload).state == "confirmed"

    # the fresh worker carries on as normal
    second = _submit(trio, "after-the-crash")
    assert wait_for(lambda: _state(second) in ("queued", "running", "completed"), 60)
    assert len(_jobs(journal, second.uid)) == 1 and len(_jobs(journal, workload.uid)) == 1


def test_redis_restart_loses_queued_tasks_and_the_periodic_passes_recover_them(fleet, journal, workers, trio):
    from broker import tasks

    stored = [_submit(trio, f"queued-{i}") for i in range(3)]   # no worker yet: tasks wait in Redis
    down_s = redis_restart()                                       # ... and are lost
    worker = workers()
    time.sleep(2)
    assert {_state(w) for w in stored} == {"submitted"}           # nothing left to run them

    tasks.place_waiting.delay()                                    # what beat sends every interval
    assert wait_for(lambda: all(_state(w) in ("queued", "running", "completed") for w in stored), 60), (
        worker.log_path.read_text()[-3000:])
    for w in stored:
        assert len(_jobs(journal, w.uid)) == 1
    assert down_s < 15


def test_submitting_while_redis_is_down_stores_the_workload_and_answers_201(fleet, client, trio, broker_url):
    import subprocess

    from tests.factories import PASSWORD

    client.login(username=trio.member.username, password=PASSWORD)
    subprocess.run(["redis-cli", "shutdown", "nosave"], capture_output=True, timeout=30)
    try:
        response = client.post(reverse("api-workloads"), json.dumps({
            "project": trio.project.id, "name": "redis-down", "command": "x", "gpu_class": "a100-80gb",
            "gpus_per_worker": 1, "workers": 1}), content_type="application/json")
    finally:
        redis_restart()
    assert response.status_code == 201, response.content
    assert Workload.objects.get(id=response.json()["id"]).state == "submitted"


def test_worker_database_connection_cut_mid_task_recovers_without_a_duplicate(fleet, journal, workers, trio):
    from broker.services.following.reconcile import reconcile_fleet

    worker = workers(pause="dispatch.after_attempt_written")  # the attempt row is committed
    workload = _submit(trio, "db-cut", minutes=30)
    assert wait_for(lambda: worker.paused, 60), worker.log_path.read_text()[-3000:]
    cut = terminate_backends()                               # every connection but ours: the worker's
    assert cut
    worker.resume()                                          # it sends the job, then cannot record it
    assert wait_for(lambda: len(_jobs(journal, workload.uid)) == 1, 30)
    assert wait_for(lambda: "OperationalError" in worker.log_path.read_text()
                    or "InterfaceError" in worker.log_path.read_text(), 30), worker.log_path.read_text()[-3000:]
    assert _state(workload) == "dispatching"

    _after_the_lease()
    reconcile_fleet()                                        # the worker runs the dispatch it enqueued
    assert wait_for(lambda: _state(workload) in ("queued", "running"), 60), worker.log_path.read_text()[-3000:]
    workload.refresh_from_db()
    assert workload.state in ("queued", "running")
    assert [j["job_id"] for j in _jobs(journal, workload.uid)] == [workload.destination_job_id]

    second = _submit(trio, "same-worker-reconnects")         # the same worker, a new connection
    assert wait_for(lambda: _state(second) in ("queued", "running", "completed"), 60), (
        worker.log_path.read_text()[-3000:])
    assert len(_jobs(journal, second.uid)) == 1


def test_broker_outage_jobs_carry_on_submissions_wait_visibly_and_restart_catches_up(
        fleet, journal, workers, trio, client, broker_url, tmp_path):
    from tests.factories import PASSWORD

    intervals = {"GPUBROKER_INVENTORY_INTERVAL_S": 5, "GPUBROKER_STATUS_INTERVAL_S": 2,
                 "GPUBROKER_RECONCILE_INTERVAL_S": 5}
    beat = BeatProcess(broker_url, tmp_path, intervals)
    worker = workers()
    beat.start()
    try:
        # 20 s each at the journal: still running after the stop, the outage's submission and
        # its pages, on a loaded machine too (8 s had ended by then in a CI run)
        running = [_submit(trio, f"long-{i}", minutes=40) for i in range(2)]
        assert wait_for(lambda: all(_state(w) == "running" for w in running), 60), worker.log_path.read_text()[-3000:]
    finally:
        beat.stop()
        worker.stop()                                                             # the broker is down

    stopped_at = time.monotonic()
    client.login(username=trio.member.username, password=PASSWORD)
    response = client.post(reverse("api-workloads"), json.dumps({
        "project": trio.project.id, "name": "during-outage", "command": "x", "gpu_class": "a100-80gb",
        "gpus_per_worker": 2, "workers": 1}), content_type="application/json")
    assert response.status_code == 201
    waiting = Workload.objects.get(id=response.json()["id"])
    page = client.get(reverse("workload-detail", args=[waiting.id])).content.decode()
    assert 'data-state="submitted"' in page and "Not placed yet." in page          # it says it waits
    listing = client.get(reverse("workload-list")).content.decode()
    assert "during-outage" in listing

    # the jobs carry on at the destination, and end there, while nobody is watching
    assert all(j["state"] == "running" for w in running for j in _jobs(journal, w.uid))
    assert wait_for(lambda: all(j["state"] == "completed" for w in running for j in _jobs(journal, w.uid)), 60)
    time.sleep(max(0.0, 5.0 - (time.monotonic() - stopped_at)))                   # an outage of 5 s at least
    assert all(_state(w) == "running" for w in running)                          # not charged yet: no one looked
    assert _state(waiting) == "submitted"
    outage_s = time.monotonic() - stopped_at

    restarted_at = time.monotonic()
    workers()
    beat = BeatProcess(broker_url, tmp_path, intervals)
    beat.start()
    try:
        assert wait_for(lambda: _state(waiting) in ("queued", "running", "completed"), 60)
        dispatch_lag = time.monotonic() - restarted_at
        assert wait_for(lambda: all(_state(w) == "completed" for w in running), 60)
        end_lag = time.monotonic() - restarted_at
    finally:
        beat.stop()
    for w in [*running, waiting]:
        assert len(_jobs(journal, w.uid)) == 1
    assert all(Reservation.objects.get(workload=w).state == "released" for w in running)
    figures = {"outage_s": round(outage_s, 1), "dispatch_lag_s": round(dispatch_lag, 1),
               "ended_jobs_recorded_lag_s": round(end_lag, 1), **intervals}
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "outage-lag.json").write_text(json.dumps(figures, indent=2))
    print("broker outage:", figures)
    assert dispatch_lag < 30 and end_lag < 30
