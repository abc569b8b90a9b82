"""The same tasks, run by a real Celery worker process over Redis (CI: .ci/run)."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from django.conf import settings

from broker.models import Cluster, Workload
from tests.support.worker import WorkerProcess

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker(tmp_path: Path):
    url = settings.CELERY_BROKER_URL
    if not url.startswith("redis://"):
        pytest.skip("needs CELERY_BROKER_URL=redis://... (a real worker)")
    import redis

    redis.Redis.from_url(url).flushdb()  # no task left over from an earlier run
    os.environ["GPUBROKER_SIM_TIME_SCALE"] = "600"
    proc = WorkerProcess(url, tmp_path / "worker.log")
    proc.start()
    yield proc
    proc.stop()
    os.environ.pop("GPUBROKER_SIM_TIME_SCALE", None)


def _wait_for(predicate, timeout_s: float, poke=None) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        if poke:
            poke()
        time.sleep(0.5)
    return False


def test_worker_places_dispatches_and_finishes_a_submitted_job(worker):
    from broker import tasks
    from demo.seed import demo_seed
    from broker.services.submitting.workloads import workload_submit
    from portal.tenancy.models import Project
    from django.contrib.auth import get_user_model

    demo_seed()
    tasks.sync_all_inventory.delay()
    assert _wait_for(lambda: Cluster.objects.filter(health="healthy").count() == 3, 60), worker.log_path.read_text()[-3000:]

    researcher = get_user_model().objects.get(username="researcher")
    project = Project.objects.get(slug="lattice-qcd")
    workload = workload_submit(user=researcher, project_id=project.id, spec_data={
        "name": "via-worker", "command": "python train.py", "gpu_class": "a100-80gb",
        "gpus_per_worker": 2, "workers": 2, "time_limit_minutes": 30})

    def finished() -> bool:
        return Workload.objects.get(id=workload.id).state == "completed"

    assert _wait_for(finished, 90, poke=lambda: tasks.poll_all_status.delay()), (
        Workload.objects.get(id=workload.id).state, worker.log_path.read_text()[-3000:])
    done = Workload.objects.get(id=workload.id)
    assert done.destination_job_id and done.cluster is not None
    assert done.reservations.get().state == "released"
