"""/metrics reports Celery's side: the depth of each queue in the Redis broker and the
failures of each task, counted in the database where the web process's scrape reads them."""
from __future__ import annotations

import logging

import pytest
from django.db import DatabaseError

from broker import tasks
from broker.models import Workload
from portal.metrics import tasks as metrics_tasks
from portal.metrics.celery_queues import broker_queue_depths, queue_depths
from portal.metrics.models import TaskFailureCount
from tests.portal.metrics.test_scrape import scrape

FAILURES = "gpubroker_celery_task_failures_total"
CANCEL = "broker.tasks.propagate_cancel"


class FakeRedis:
    """Lists by name, as Celery's Redis transport keeps its queues (no Redis server here)."""

    def __init__(self, lists: dict[str, list[bytes]]) -> None:
        self.lists = lists

    def llen(self, name: str) -> int:
        return len(self.lists.get(name, []))


def test_queue_depth_is_the_length_of_each_queues_list_in_the_broker():
    client = FakeRedis({"celery": [b"m1", b"m2", b"m3"], "other": [b"m"]})
    assert queue_depths(client, ["celery", "empty"]) == {"celery": 3, "empty": 0}


@pytest.mark.parametrize("url", ["", "amqp://guest@127.0.0.1//", "memory://"])
def test_without_a_redis_broker_no_queue_is_read(url):
    assert broker_queue_depths(url, ["celery"]) == {}


def test_a_redis_broker_out_of_reach_costs_the_series_not_the_scrape(caplog):
    # port 1: nothing listens, the connection is refused at once
    assert broker_queue_depths("redis://127.0.0.1:1/0", ["celery"]) == {}
    assert "Celery queue depth not read" in caplog.text


def test_in_process_tasks_report_no_queue_depth(client, db, settings):
    settings.CELERY_BROKER_URL = ""  # tasks run in-process (CI's run configures Redis)
    values = scrape(client)
    assert not [key for key in values if key[0] == "gpubroker_celery_queue_depth"]


def _fail_a_task() -> None:
    """Run a task as a worker does (its error kept, not raised into the caller): no such
    workload, so it raises."""
    result = tasks.propagate_cancel.apply((987654,), throw=False)
    assert result.failed() and isinstance(result.result, Workload.DoesNotExist)


def test_a_task_failing_in_process_raises_into_its_caller_and_is_not_counted(client, db):
    # no broker: Celery raises the error where the task was asked for, and sends no failure signal
    with pytest.raises(Workload.DoesNotExist):
        tasks.propagate_cancel.delay(987654)
    assert not TaskFailureCount.objects.exists()


def test_each_failure_of_a_task_is_counted_and_scraped_per_task(client, db):
    assert (FAILURES, (("task", CANCEL),)) not in scrape(client)
    _fail_a_task()
    _fail_a_task()
    assert scrape(client)[(FAILURES, (("task", CANCEL),))] == 2
    # the count is a row, not a figure of this process: a worker's failures reach the web's scrape
    row = TaskFailureCount.objects.get(task=CANCEL)
    assert row.failures == 2 and row.last_failed_at is not None


def test_a_database_that_cannot_take_the_count_logs_it_and_raises_nothing(monkeypatch, caplog):
    def refused(**_: object) -> None:
        raise DatabaseError("connection lost")

    monkeypatch.setattr(metrics_tasks, "task_failure_count", refused)
    with caplog.at_level(logging.WARNING):
        metrics_tasks.count_task_failure(sender=tasks.propagate_cancel)
    assert f"could not count a failure of {CANCEL}" in caplog.text
