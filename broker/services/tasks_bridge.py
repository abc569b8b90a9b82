"""Enqueue follow-up work after the current transaction commits.

Services call these instead of importing tasks directly, so a rolled-back
transaction never leaves a task behind and the import graph stays one-way.

A queue that cannot be reached (Redis down or restarting) does not fail the caller:
the work is already stored, and the periodic passes pick it up (place_waiting for
submitted and waiting workloads, reconcile for reserved, dispatching and cancelling
ones).  Failing here would show a researcher an error for a submission that was saved.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Protocol

from django.db import transaction
from kombu.exceptions import OperationalError as QueueUnreachable

log = logging.getLogger(__name__)


class Sink(Protocol):
    """Where follow-ups go while one is installed: ``sink(task_name, *args)``."""

    def __call__(self, task_name: str, /, *args: object) -> object: ...


class _Task(Protocol):
    def delay(self, *args: object) -> object: ...


# While a sink is installed, follow-ups go to it (still after the commit) instead of Celery:
# the replay drops them, the fault harness queues them and runs them itself.
_sink: Sink | None = None


@contextlib.contextmanager
def task_sink(sink: Sink) -> Iterator[None]:
    """Send every follow-up to ``sink(task_name, *args)`` after its commit, until the block ends."""
    global _sink
    saved, _sink = _sink, sink
    try:
        yield
    finally:
        _sink = saved


def _on_commit(task_name: str, *args: object) -> None:
    if _sink is not None:
        sink = _sink
        transaction.on_commit(lambda: sink(task_name, *args))
        return

    def send() -> None:
        from broker import tasks

        task = getattr(tasks, task_name)
        if task.app.conf.task_always_eager:
            _run_in_process(task_name, task, args)
            return
        try:
            task.delay(*args)
        except (QueueUnreachable, OSError) as exc:
            log.warning("could not queue %s%r (%s); the periodic passes will pick it up", task_name, args, exc)

    transaction.on_commit(send)


def _run_in_process(task_name: str, task: _Task, args: tuple[object, ...]) -> None:
    """Without a queue the follow-up runs here, after the commit, inside the request that
    stored the write.  Whatever goes wrong in it (a locked database, a cluster whose backend
    cannot be built) must not turn that request's answer into a 500: the write is stored and
    the periodic passes retry the work.  A simulated crash (a BaseException) still passes."""
    try:
        task.delay(*args)
    except Exception:
        log.exception(
            "in-process %s%r failed after its request was stored; the periodic passes will retry it", task_name, args
        )


def enqueue_place(workload_id: int) -> None:
    _on_commit("place_workload", workload_id)


def enqueue_place_pass() -> None:
    """The next placement pass.  Without a queue (eager) nothing: a pass would run the next
    inside itself; the in-process ticker runs passes on its own."""
    from broker import tasks

    if _sink is None and tasks.place_waiting.app.conf.task_always_eager:
        return
    _on_commit("place_waiting")


def enqueue_dispatch(workload_id: int) -> None:
    _on_commit("dispatch_workload", workload_id)


def enqueue_dispatch_chunk(workload_ids: list[int]) -> None:
    """One task dispatches the workloads a placing pass reserved together."""
    _on_commit("dispatch_workloads", list(workload_ids))


def enqueue_cancel(workload_id: int) -> None:
    _on_commit("propagate_cancel", workload_id)
