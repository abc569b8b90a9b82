"""Background work without Celery: one thread runs the beat schedule in-process.

Used by ``manage.py demo`` (and usable by any single-process deployment): the same
task functions as the Celery beat schedule, called at the same intervals.
"""

from __future__ import annotations

import logging
import threading
import time

from django.conf import settings
from django.db import close_old_connections

log = logging.getLogger(__name__)


class Ticker(threading.Thread):
    def __init__(self) -> None:
        super().__init__(name="broker-ticker", daemon=True)
        self.stop_event = threading.Event()
        self._due: dict[str, float] = {}

    def run(self) -> None:
        from accounting import tasks as accounting_tasks
        from broker import tasks
        from portal.metrics import tasks as metrics_tasks

        schedule = {
            "inventory": (settings.GPUBROKER_INVENTORY_INTERVAL_S, tasks.sync_all_inventory),
            "status": (settings.GPUBROKER_STATUS_INTERVAL_S, tasks.poll_all_status),
            "place": (settings.GPUBROKER_STATUS_INTERVAL_S, tasks.place_waiting),
            "withdraw": (60.0, tasks.withdraw_policy_holds),
            "reconcile": (settings.GPUBROKER_RECONCILE_INTERVAL_S, tasks.reconcile),
            "usage": (settings.GPUBROKER_USAGE_INTERVAL_S, accounting_tasks.collect_all_usage),
            "sample": (settings.GPUBROKER_SAMPLE_INTERVAL_S, metrics_tasks.sample_fleet),
            "quota-requests": (3600.0, tasks.end_quota_requests),
            "long-waits": (60.0, tasks.notify_long_waits),
        }
        while not self.stop_event.is_set():
            now = time.monotonic()
            for name, (interval, task) in schedule.items():
                if now >= self._due.get(name, 0):
                    self._due[name] = now + interval
                    self._run(name, task)
            self.stop_event.wait(0.5)

    def _run(self, name: str, task) -> None:
        close_old_connections()
        try:
            task()
        except Exception:  # keep ticking: one bad pass must not stop the demo
            log.exception("in-process %s pass failed", name)
