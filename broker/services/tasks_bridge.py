"""Enqueue follow-up work after the current transaction commits.

Services call these instead of importing tasks directly, so a rolled-back
transaction never leaves a task behind and the import graph stays one-way.

A queue that cannot be reached (Redis down or restarting) does not fail the caller:
the work is already stored, and the periodic passes pick it up (place_waiting for
submitted and waiting workloads, reconcile for reserved, dispatching and cancelling
ones).  Failing here would show a researcher an error for a submission that was saved.
"""
from __future__ import annotations

import logging

from django.db import transaction
from kombu.exceptions import OperationalError as QueueUnreachable

log = logging.getLogger(__name__)


def _on_commit(task_name: str, *args: object) -> None:
    def send() -> None:
        from broker import tasks

        task = getattr(tasks, task_name)
        try:
            task.delay(*args)
        except (QueueUnreachable, OSError) as exc:
            if task.app.conf.task_always_eager:
                raise
            log.warning("could not queue %s%r (%s); the periodic passes will pick it up", task_name, args, exc)

    transaction.on_commit(send)


def enqueue_place(workload_id: int) -> None:
    _on_commit("place_workload", workload_id)


def enqueue_dispatch(workload_id: int) -> None:
    _on_commit("dispatch_workload", workload_id)


def enqueue_cancel(workload_id: int) -> None:
    _on_commit("propagate_cancel", workload_id)
