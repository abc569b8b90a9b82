"""Enqueue follow-up work after the current transaction commits.

Services call these instead of importing tasks directly, so a rolled-back
transaction never leaves a task behind and the import graph stays one-way.
"""
from __future__ import annotations

from django.db import transaction


def _on_commit(task_name: str, *args: object) -> None:
    def send() -> None:
        from broker import tasks

        getattr(tasks, task_name).delay(*args)

    transaction.on_commit(send)


def enqueue_place(workload_id: int) -> None:
    _on_commit("place_workload", workload_id)


def enqueue_dispatch(workload_id: int) -> None:
    _on_commit("dispatch_workload", workload_id)


def enqueue_cancel(workload_id: int) -> None:
    _on_commit("propagate_cancel", workload_id)
