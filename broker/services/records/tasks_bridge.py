"""Every follow-up that runs after the current transaction commits goes through here.

Services call these instead of importing tasks directly or calling
``transaction.on_commit`` themselves, so a rolled-back transaction never leaves a task (or a
mail) behind, the import graph stays one-way, and a run that installs a task sink in the
runtime (``broker.runtime``: the replay drops follow-ups, the fault harness queues the ones
it works itself) sees every one of them, by name, with its arguments.

A queue that cannot be reached (Redis down or restarting) does not fail the caller:
the work is already stored, and the periodic passes pick it up (place_waiting for
submitted and waiting workloads, reconcile for reserved, dispatching and cancelling
ones).  Failing here would show a researcher an error for a submission that was saved.
"""

from __future__ import annotations

import importlib
import logging
import threading
from typing import ContextManager, Protocol

from django.conf import settings
from django.core.mail import send_mail
from django.db import close_old_connections, transaction
from kombu.exceptions import OperationalError as QueueUnreachable

from broker import runtime

log = logging.getLogger(__name__)


class _Conf(Protocol):
    task_always_eager: bool


class _App(Protocol):
    conf: _Conf


class _Task(Protocol):
    app: _App

    def delay(self, *args: object) -> object: ...

    def __call__(self, *args: object) -> object: ...


# follow-ups that are Celery tasks of another module than broker.tasks
_TASK_MODULE = {"run_impact": "broker.policyrelease.tasks"}
# without a queue (eager) these run in a thread, so the request that asked answers at once
_THREADED = frozenset({"run_impact"})


def after_commit(task_name: str, *args: object) -> None:
    """Once the caller's transaction commits (never if it rolls back), hand ``task_name(*args)``
    to the runtime's task sink, or without one deliver it (``deliver``)."""
    sink = runtime.current().task_sink  # the sink in force now, when the work was asked for
    if sink is not None:
        transaction.on_commit(lambda: sink(task_name, *args))
    else:
        transaction.on_commit(lambda: deliver(task_name, *args))


def deliver(task_name: str, *args: object) -> None:
    """What happens to a follow-up without a sink: a mail is sent here, a task is queued on
    Celery (run here when Celery is eager).  A sink may hand on follow-ups it does not work."""
    if task_name == "send_mail":
        _mail(*args)
        return
    task = _task(task_name)
    if task.app.conf.task_always_eager:
        if task_name in _THREADED:
            threading.Thread(target=_in_thread, args=(task, args), name=f"{task_name}{args}", daemon=True).start()
        else:
            _run_in_process(task_name, task, args)
        return
    try:
        task.delay(*args)
    except (QueueUnreachable, OSError) as exc:
        log.warning("could not queue %s%r (%s); the periodic passes will pick it up", task_name, args, exc)


def _task(task_name: str) -> _Task:
    """The Celery task of that name, found by name: the bridge never imports the task modules
    (they import the services, which import the bridge)."""
    task: _Task = getattr(importlib.import_module(_TASK_MODULE.get(task_name, "broker.tasks")), task_name)
    return task


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


def _in_thread(task: _Task, args: tuple[object, ...]) -> None:
    try:
        task(*args)
    finally:
        close_old_connections()


def _mail(subject: object, body: object, to: object) -> None:
    try:
        send_mail(str(subject), str(body), settings.DEFAULT_FROM_EMAIL, [str(to)])
    except OSError:  # a mail server down must not fail the write that asked for the mail
        log.warning("mail %r to %s not sent", subject, to, exc_info=True)


def enqueue_place(workload_id: int) -> None:
    after_commit("place_workload", workload_id)


def background_in_process() -> bool:
    """Whether follow-ups run in this process (Celery eager: ``make demo``, the tests) rather
    than on a queue that a worker drains."""
    return bool(_task("place_waiting").app.conf.task_always_eager)


def enqueue_place_pass() -> None:
    """The next placement pass.  Without a queue (eager) nothing: a pass would run the next
    inside itself; the in-process ticker runs passes on its own."""
    if runtime.current().task_sink is None and background_in_process():
        return
    after_commit("place_waiting")


def enqueue_dispatch(workload_id: int) -> None:
    after_commit("dispatch_workload", workload_id)


def enqueue_dispatch_chunk(workload_ids: list[int]) -> None:
    """One task dispatches the workloads a placing pass reserved together."""
    after_commit("dispatch_workloads", list(workload_ids))


def enqueue_cancel(workload_id: int) -> None:
    after_commit("propagate_cancel", workload_id)


def enqueue_notification(workload_id: int, event: str) -> None:
    after_commit("notify_workload_event", workload_id, event)


def enqueue_webhook(notification_id: int) -> None:
    after_commit("deliver_webhook", notification_id)


def enqueue_mail(*, subject: str, body: str, to: str) -> None:
    after_commit("send_mail", subject, body, to)


def enqueue_impact(impact_id: int) -> None:
    """An impact replay of a policy release (a child process; without a queue, in a thread)."""
    after_commit("run_impact", impact_id)


class Sink(Protocol):
    """Where follow-ups go while one is installed: ``sink(task_name, *args)``."""

    def __call__(self, task_name: str, /, *args: object) -> object: ...


def task_sink(sink: Sink) -> ContextManager[runtime.Runtime]:
    """Until the block ends, every follow-up goes to ``sink(task_name, *args)`` after its
    commit (a shorthand for ``runtime.override(task_sink=sink)``)."""
    return runtime.override(task_sink=sink)
