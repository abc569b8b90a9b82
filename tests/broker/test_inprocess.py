"""One schedule: Celery beat runs CELERY_BEAT_SCHEDULE, and so does the in-process ticker."""
from __future__ import annotations

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from broker.inprocess import Ticker


def test_one_schedule_drives_beat_and_the_in_process_ticker():
    ticker = Ticker()
    beat = settings.CELERY_BEAT_SCHEDULE
    assert [b.name for b in ticker.beats] == list(beat)
    for b in ticker.beats:
        assert b.interval_s == beat[b.name]["schedule"]
        assert b.task.name == beat[b.name]["task"]  # the very task beat would send


@pytest.mark.django_db
def test_the_ticker_runs_each_entry_when_due():
    schedule = {"often": {"task": "broker.tasks.notify_long_waits", "schedule": 10.0},
                "rarely": {"task": "broker.tasks.end_quota_requests", "schedule": 3600.0}}
    ticker = Ticker(schedule)
    assert ticker.tick(0.0) == ["often", "rarely"]
    assert ticker.tick(5.0) == []
    assert ticker.tick(10.0) == ["often"]


@pytest.mark.parametrize("entry, fragment", [
    ({"task": "broker.tasks.reconcile", "schedule": "every minute"}, "needs seconds"),
    ({"task": "broker.tasks.no_such_task", "schedule": 60.0}, "no task 'broker.tasks.no_such_task'"),
])
def test_an_entry_the_ticker_cannot_run_stops_it_naming_the_entry(entry, fragment):
    with pytest.raises(ImproperlyConfigured, match="CELERY_BEAT_SCHEDULE\\['odd'\\]") as exc:
        Ticker({"odd": entry})
    assert fragment in str(exc.value)
