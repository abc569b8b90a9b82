"""Install the fault hooks into a running broker (this process only), and take them out.

Nothing here edits the broker's code: the backend registry's builders are wrapped, a
few service functions are wrapped where they are looked up, two model signals are
connected, and the task bridge is pointed at a queue the harness drains itself.
Every context manager restores what it changed.
"""

from __future__ import annotations

import contextlib
from datetime import datetime
from typing import Callable, Iterator

from django.db.models.signals import post_save, pre_save

from broker.faults.points import FaultPlan, FaultyBackend


@contextlib.contextmanager
def faulty_backends(
    plan: FaultPlan, builders: dict[str, Callable] | None = None, retime: Callable[[], object] | None = None
) -> Iterator[None]:
    """Every backend the services build comes wrapped in a FaultyBackend.

    ``builders`` adds or replaces builders by cluster kind (e.g. a Slurm backend built
    straight from the test cluster's settings)."""
    from broker.backends import registry

    saved = dict(registry._BUILDERS)
    base = {**saved, **(builders or {})}

    def wrap(build: Callable) -> Callable:
        return lambda cluster: FaultyBackend(build(cluster), plan, retime)

    registry._BUILDERS.update({kind: wrap(build) for kind, build in base.items()})
    try:
        yield
    finally:
        registry._BUILDERS.clear()
        registry._BUILDERS.update(saved)


@contextlib.contextmanager
def _patched(module, name: str, replacement) -> Iterator[None]:
    saved = getattr(module, name)
    setattr(module, name, replacement)
    try:
        yield
    finally:
        setattr(module, name, saved)


@contextlib.contextmanager
def service_hooks(plan: FaultPlan) -> Iterator[None]:
    """Fire the service hooks (see points.SERVICE_HOOKS) from inside the services."""
    from broker.models import DispatchAttempt, Reservation
    from broker.services import cancel, placing, reconcile, status

    def attempt_before(sender, instance, **kwargs):
        if instance.pk is None:
            plan.fire("attempt:before")

    def reservation_created(sender, instance, created, **kwargs):
        if created:
            plan.fire("reservation:created")

    retry_elsewhere = placing.workload_retry_elsewhere
    status_release = status.reservation_release
    reconcile_expire = reconcile.reservation_expire
    cancel_release = cancel.reservation_release

    def hooked_retry_elsewhere(**kwargs):
        plan.fire("dispatch:retry_elsewhere")
        return retry_elsewhere(**kwargs)

    def hooked_status_release(**kwargs):
        plan.fire("status:release")
        return status_release(**kwargs)

    def hooked_expire(**kwargs):
        done = reconcile_expire(**kwargs)
        if done:
            plan.fire("reconcile:expired")
        return done

    def hooked_cancel_release(**kwargs):
        plan.fire("cancel:release")
        return cancel_release(**kwargs)

    pre_save.connect(attempt_before, sender=DispatchAttempt, weak=False, dispatch_uid="faults-attempt")
    post_save.connect(reservation_created, sender=Reservation, weak=False, dispatch_uid="faults-reservation")
    try:
        with (
            _patched(placing, "workload_retry_elsewhere", hooked_retry_elsewhere),
            _patched(status, "reservation_release", hooked_status_release),
            _patched(reconcile, "reservation_expire", hooked_expire),
            _patched(cancel, "reservation_release", hooked_cancel_release),
        ):
            yield
    finally:
        pre_save.disconnect(sender=DispatchAttempt, dispatch_uid="faults-attempt")
        post_save.disconnect(sender=Reservation, dispatch_uid="faults-reservation")


@contextlib.contextmanager
def captured_tasks(queue: list) -> Iterator[None]:
    """Tasks the services enqueue (after commit) go to ``queue`` as (name, args),
    instead of Celery: the harness is the worker, and can lose them (Redis restart)."""
    from broker.services import tasks_bridge

    with tasks_bridge.task_sink(lambda task_name, *args: queue.append((task_name, args))):
        yield


@contextlib.contextmanager
def virtual_clock(now: Callable[[], datetime]) -> Iterator[None]:
    """The broker's ``timezone.now()`` (and every auto_now field) reads ``now``."""
    from broker.clock import clock_override

    with clock_override(now):
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
