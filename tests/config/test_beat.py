"""Exactly one beat: of two Celery beats started on one database, only the holder of the
lease applies the schedule's entries; the other applies none, and takes over once the
holder stops."""
from __future__ import annotations

from datetime import timedelta

import pytest

from config.beat import SingleBeatScheduler
from config.celery import app


class Recording(SingleBeatScheduler):
    """The real scheduler; what it would send to the broker is recorded instead."""

    producer = None  # no broker connection: apply_entry below never sends

    def __init__(self, *args, **kwargs) -> None:
        self.applied: list[str] = []
        super().__init__(*args, **kwargs)

    def apply_entry(self, entry, producer=None) -> None:
        self.applied.append(entry.name)


def _beat(tmp_path, name: str) -> Recording:
    beat = Recording(app=app, schedule_filename=str(tmp_path / f"{name}-schedule"), lazy=False)
    for entry in beat.schedule.values():  # every entry due at once, as after a long stop
        entry.last_run_at = entry.last_run_at - timedelta(days=1)
    beat._heap = None
    return beat


def _run(beat: Recording, ticks: int = 12) -> None:
    for _ in range(ticks):
        beat.tick()


@pytest.mark.django_db(transaction=True)
def test_a_second_beat_schedules_nothing_while_the_first_runs(tmp_path):
    first, second = _beat(tmp_path, "first"), _beat(tmp_path, "second")
    _run(first)
    _run(second)
    assert first.applied, "the first beat applied nothing"
    assert second.applied == [] and second.waiting
    first.close()  # the first stops: the lease is handed on
    for entry in second.schedule.values():
        entry.last_run_at = entry.last_run_at - timedelta(days=1)
    second._heap = None
    _run(second)
    assert second.applied and not second.waiting


@pytest.mark.django_db(transaction=True)
def test_beat_outlives_a_database_restart_and_schedules_again_after_it(tmp_path, monkeypatch):
    """A PostgreSQL restart cut beat's connection and the error ended the process: every
    periodic pass stopped until someone restarted it (seen in the compose stack's kill test)."""
    from django.db import OperationalError

    beat = _beat(tmp_path, "only")
    real_take = __import__("config.beat", fromlist=["beat_lease_take"]).beat_lease_take

    def cut(**kwargs):
        raise OperationalError("terminating connection due to administrator command")

    monkeypatch.setattr("config.beat.beat_lease_take", cut)
    assert [beat.tick() for _ in range(3)] == [2.0, 2.0, 2.0]
    assert beat.applied == []  # nothing scheduled while it cannot tell it holds the lease
    monkeypatch.setattr("config.beat.beat_lease_take", real_take)
    _run(beat)
    assert beat.applied, "beat did not schedule again once the database answered"
