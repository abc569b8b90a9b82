"""Install the fault hooks into a running broker (this process only), and take them out.

Only through the broker's one runtime seam (``broker.runtime.override``), for the length of a
``with`` block: its backend builder (every cluster's backend comes wrapped in a
``FaultyBackend``, or is replaced by the harness's own destination), its armed failpoints
(``broker.failpoints``), its task sink (every after-commit follow-up of the services, see
``tasks_bridge``) and its clock.  No module attribute, builder table or model signal of the
broker is touched.
"""

from __future__ import annotations

import contextlib
from datetime import datetime
from typing import Callable, Iterator, cast

from broker import runtime
from broker.backends.base import Backend
from broker.failpoints import FAILPOINTS, armed
from broker.faults.points import FaultPlan, FaultyBackend


# the follow-ups the harness runs itself, as the broker's worker (``Harness._task_fn``)
WORKED_TASKS = frozenset(
    {"place_workload", "place_waiting", "dispatch_workload", "dispatch_workloads", "propagate_cancel"}
)


@contextlib.contextmanager
def faulty_backends(
    plan: FaultPlan, builders: dict[str, Callable] | None = None, retime: Callable[[], object] | None = None
) -> Iterator[None]:
    """Every backend the services build comes wrapped in a FaultyBackend.

    ``builders`` adds or replaces builders by cluster kind (e.g. a Slurm backend built
    straight from the test cluster's settings)."""
    from broker.backends.registry import backend_override

    own = dict(builders or {})

    def build(cluster, default: Callable) -> Backend:
        # a decorator with the Backend's methods (and the rest forwarded), not a subclass
        return cast(Backend, FaultyBackend(own.get(cluster.kind, default)(cluster), plan, retime))

    with backend_override(build):
        yield


@contextlib.contextmanager
def failpoint_hooks(plan: FaultPlan) -> Iterator[None]:
    """Every failpoint of the services fires the plan's hook of the same name (see
    broker.failpoints); the plan decides whether anything happens there."""

    def fire(name: str) -> None:
        plan.fire(name)

    with armed(dict.fromkeys(FAILPOINTS, fire)):
        yield


@contextlib.contextmanager
def captured_tasks(queue: list) -> Iterator[None]:
    """Tasks the services enqueue (after commit) that the harness works go to ``queue`` as
    (name, args), instead of Celery: the harness is the worker, and can lose them (Redis
    restart).  The other follow-ups (notifications, mails) are delivered as without a sink."""
    from broker.services.records import tasks_bridge

    def sink(task_name: str, *args: object) -> None:
        if task_name in WORKED_TASKS:
            queue.append((task_name, args))
        else:
            tasks_bridge.deliver(task_name, *args)

    with tasks_bridge.task_sink(sink):
        yield


@contextlib.contextmanager
def virtual_clock(now: Callable[[], datetime]) -> Iterator[None]:
    """The broker's clock reads ``now`` (``broker.runtime``)."""
    with runtime.override(now=now):
        yield


def drop_db_connection() -> None:
    """Drop this thread's database connection under it, as a network cut or a server
    restart would.  PostgreSQL: ``pg_terminate_backend`` from a second connection, so the
    next statement fails.  Elsewhere: raise the OperationalError that failure gives."""
    from django.db import OperationalError, connection

    if connection.vendor == "postgresql" and connection.connection is not None:
        pid = connection.connection.info.backend_pid
        terminate_backends([pid])
        return
    raise OperationalError("server closed the connection unexpectedly (fault injected)")


def _conninfo() -> dict:
    from django.db import connection

    s = connection.settings_dict
    out = {
        "dbname": s["NAME"],
        "user": s["USER"] or None,
        "password": s["PASSWORD"] or None,
        "host": s["HOST"] or None,
        "port": s["PORT"] or None,
    }
    return {k: v for k, v in out.items() if v}


def terminate_backends(pids: list[int] | None = None, *, exclude_self: bool = True) -> list[int]:
    """pg_terminate_backend: ``pids``, or every other connection to the current database.
    Waits (up to 5 s) until each is gone.  Returns the pids terminated."""
    import psycopg

    with psycopg.connect(**_conninfo(), autocommit=True) as other:
        if pids is None:
            rows = other.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchall()
            pids = [r[0] for r in rows]
            if exclude_self:
                from django.db import connection

                if connection.connection is not None:
                    mine = connection.connection.info.backend_pid
                    pids = [p for p in pids if p != mine]
        for pid in pids:
            other.execute("SELECT pg_terminate_backend(%s, 5000)", [pid])
    return pids
