"""Background work without Celery: one thread runs the beat schedule in-process.

Used by ``manage.py demo`` (and usable by any single-process deployment).  There is one
schedule, ``CELERY_BEAT_SCHEDULE`` in the settings: Celery beat runs it with a broker, this
ticker runs the same entries (same tasks, same intervals) without one.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import close_old_connections

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Beat:
    name: str
    interval_s: float
    task: Callable[[], Any]


def beats(schedule: Mapping[str, Mapping[str, Any]]) -> list[Beat]:
    """The schedule's entries as (name, interval, task function); an entry this ticker cannot
    run (not a number of seconds, no such task) stops it at start, naming the entry."""
    found = []
    for name, entry in schedule.items():
        interval = entry.get("schedule")
        if isinstance(interval, bool) or not isinstance(interval, (int, float)) or interval <= 0:
            raise ImproperlyConfigured(f"CELERY_BEAT_SCHEDULE[{name!r}]: the ticker needs seconds, got {interval!r}")
        found.append(Beat(name, float(interval), _task(name, str(entry.get("task", "")))))
    return found


def _task(name: str, dotted: str) -> Callable[[], Any]:
    module, _, attr = dotted.rpartition(".")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError):
        raise ImproperlyConfigured(f"CELERY_BEAT_SCHEDULE[{name!r}]: no task {dotted!r}") from None


class Ticker(threading.Thread):
    def __init__(self, schedule: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        super().__init__(name="broker-ticker", daemon=True)
        self.stop_event = threading.Event()
        self.beats = beats(settings.CELERY_BEAT_SCHEDULE if schedule is None else schedule)
        self._due: dict[str, float] = {}

    def run(self) -> None:
        while not self.stop_event.is_set():
            self.tick(time.monotonic())
            self.stop_event.wait(0.5)

    def tick(self, now: float) -> list[str]:
        """Run every entry that is due at ``now`` (monotonic seconds); the names run."""
        ran = []
        for beat in self.beats:
            if now >= self._due.get(beat.name, 0):
                self._due[beat.name] = now + beat.interval_s
                self._run(beat)
                ran.append(beat.name)
        return ran

    def _run(self, beat: Beat) -> None:
        close_old_connections()
        try:
            beat.task()
        except Exception:  # keep ticking: one bad pass must not stop the demo
            log.exception("in-process %s pass failed", beat.name)
