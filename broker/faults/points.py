"""Crash points: where the harness kills or fails the broker, by name.

Two kinds of hook:

* **failpoints** (``dispatch.after_submit``, ``quota.after_reserve``, ...): the named
  ``failpoint(...)`` calls the services make at their crash points (``broker.failpoints``
  lists them).  ``broker.faults.install.failpoint_hooks`` arms every one with the plan, so
  a crash lands between two of a service's writes exactly where the service says it can;
* **destination hooks** (``submit:before``, ``cancel:after``, ...): a ``FaultyBackend``,
  built for every cluster through the registry's override seam, consults the plan before
  and after each call it forwards.  They stand for what a destination does (refuses a
  job, loses one, does not answer), and the any-hook faults (``*``) hit them too.

An armed hook does one of:

* ``crash``: raise ``Crash``, a ``BaseException``, so no ``except Exception`` in the
  services can swallow it.  An open ``transaction.atomic`` rolls back, exactly as when
  the process dies; what was committed stays; what the destination did stays.
* ``unavailable``: raise ``Unavailable`` (a timeout or a lost reply, as the services see it);
* ``db_drop``: drop the worker's database connection under it (PostgreSQL: really,
  with ``pg_terminate_backend``; SQLite: ``OperationalError``);
* any callable, called with the hook's name and cluster.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Callable, Iterator, Sequence

from broker.backends.base import DestinationJob, InventorySnapshot, ProjectIdentity, Unavailable, UsageRecord
from broker.failpoints import FAILPOINTS
from broker.spec import WorkloadSpec


class Crash(BaseException):
    """The process died here.  A BaseException: nothing in the broker may catch it."""

    def __init__(self, point: str, hook: str = "", cluster: str = ""):
        super().__init__(f"crash at {point} ({hook or 'hook'}{' on ' + cluster if cluster else ''})")
        self.point, self.hook, self.cluster = point, hook, cluster


# The named crash points, each with where it is injected.  ``hook`` is the failpoint (or a
# pattern of failpoints, or a destination hook) it arms; None: an environmental fault the
# harness applies itself.
@dataclass(frozen=True)
class CrashPoint:
    name: str
    hook: str | None
    action: str
    what: str


CRASH_POINTS: tuple[CrashPoint, ...] = (
    CrashPoint(
        "before_attempt_record",
        "dispatch.before_attempt_written",
        "crash",
        "dispatch dies after moving the workload to dispatching, before the attempt row is written",
    ),
    CrashPoint(
        "after_attempt_record",
        "dispatch.after_attempt_written",
        "crash",
        "dispatch dies after the attempt row is committed, before the destination is called",
    ),
    CrashPoint(
        "after_accept_before_reply",
        "dispatch.after_submit",
        "crash",
        "the destination accepted the job; the worker dies before it hears the reply",
    ),
    CrashPoint(
        "reply_lost", "dispatch.after_submit", "unavailable", "the destination accepted the job; the reply times out"
    ),
    CrashPoint(
        "after_reserve_before_commit",
        "quota.after_reserve",
        "crash",
        "placement dies after reserving quota, before its transaction commits",
    ),
    CrashPoint(
        "after_reject_before_replace",
        "dispatch.after_reject_released",
        "crash",
        "a local rejection released the reservation; the worker dies before re-placing",
    ),
    CrashPoint(
        "during_cancel_before_send",
        "cancel.before_send",
        "crash",
        "the cancellation is stored; the worker dies before telling the destination",
    ),
    CrashPoint(
        "during_cancel_after_send",
        "cancel.after_send",
        "crash",
        "the destination cancelled the job; the worker dies before recording it",
    ),
    CrashPoint("during_status", "status.after_poll", "crash", "the status poll dies after the destination answered"),
    CrashPoint(
        "during_status_apply",
        "status.before_release",
        "crash",
        "the status poll dies while recording a job's end (before the release commits)",
    ),
    CrashPoint(
        "during_reconcile", "reconcile.before_*", "crash", "reconciliation dies at one of its calls to a destination"
    ),
    CrashPoint(
        "reconcile_after_expire",
        "reconcile.after_expire",
        "crash",
        "reconciliation dies right after expiring a reservation, before re-queueing the workload",
    ),
    CrashPoint(
        "worker_killed_mid_task", "*", "crash", "the worker is killed (SIGKILL) at a random point of a random task"
    ),
    CrashPoint("redis_restarted", None, "env", "Redis restarts without persistence: every queued task is lost"),
    CrashPoint(
        "postgres_connection_dropped", "*", "db_drop", "the worker's PostgreSQL connection is terminated mid-task"
    ),
    CrashPoint(
        "slurmctld_stop_start",
        None,
        "env",
        "the cluster's controller stops and starts again (unreachable, under the staleness limit)",
    ),
    CrashPoint(
        "unreachable_past_staleness",
        None,
        "env",
        "the cluster is unreachable for longer than the staleness limit while its jobs run and end",
    ),
    CrashPoint("destination_rejects", None, "env", "the destination refuses the next submission (local admission)"),
    CrashPoint("lost_job", None, "env", "the destination loses a running job without a trace"),
    CrashPoint("orphan_job", None, "env", "a job nobody asked the broker for appears at a destination"),
)
POINTS_BY_NAME = {p.name: p for p in CRASH_POINTS}

# Every hook there is: the destination hooks the backend wrapper fires, and the product's
# failpoints.  ``*`` arms any of them; a pattern (``reconcile.before_*``) those it matches.
BACKEND_METHODS = ("inventory", "submit", "find", "status", "active_jobs", "cancel", "usage")
BACKEND_HOOKS = tuple(f"{m}:{w}" for m in BACKEND_METHODS for w in ("before", "after"))
ALL_HOOKS = BACKEND_HOOKS + tuple(FAILPOINTS)


def hooks_matching(pattern: str) -> tuple[str, ...]:
    """The hooks an armed ``pattern`` can fire at (an exact name, ``*`` or a glob)."""
    return tuple(h for h in ALL_HOOKS if fnmatchcase(h, pattern))


@dataclass
class Armed:
    point: str
    hook: str  # exact hook, "*" (any) or a glob such as "reconcile.before_*"
    action: str | Callable[[str, str], None]
    cluster: str = ""  # "" = any cluster
    skip: int = 0  # let this many matching hooks pass first
    times: int = 1


@dataclass
class Fired:
    point: str
    hook: str
    cluster: str
    context: str


class FaultPlan:
    """What is armed, and what has fired.  Thread-safe; one per harness run."""

    def __init__(self, rng: random.Random | None = None, db_drop: Callable[[], None] | None = None):
        self.rng = rng or random.Random(0)
        self._armed: list[Armed] = []
        self.fired: list[Fired] = []
        self.context = ""  # which task or pass is running (for the report)
        self.unreachable: set[str] = set()  # clusters whose every call fails (wrapper-level)
        self._lock = threading.Lock()
        self._db_drop = db_drop
        self.enabled = True
        self.on_submit: Callable[[str, str], None] | None = None  # sees (workload id, cluster) of each sending

    # -- arming -----------------------------------------------------------------
    def arm(
        self,
        point: str,
        *,
        hook: str | None = None,
        action: str | Callable | None = None,
        cluster: str = "",
        skip: int = 0,
        times: int = 1,
    ) -> Armed:
        spec = POINTS_BY_NAME.get(point)
        if hook is None:
            if spec is None or spec.hook is None:
                raise ValueError(f"{point!r} is not a hook crash point")
            hook = spec.hook
        if not hooks_matching(hook):  # a typo would otherwise arm a fault that never fires
            raise ValueError(f"{hook!r} names no failpoint or destination hook; known: {', '.join(ALL_HOOKS)}")
        armed = Armed(
            point=point,
            hook=hook,
            action=action or (spec.action if spec else "crash"),
            cluster=cluster,
            skip=skip,
            times=times,
        )
        with self._lock:
            self._armed.append(armed)
        return armed

    def disarm(self, armed: Armed | None = None) -> None:
        with self._lock:
            if armed is None:
                self._armed.clear()
            elif armed in self._armed:
                self._armed.remove(armed)

    @property
    def armed(self) -> list[Armed]:
        with self._lock:
            return list(self._armed)

    def record(self, point: str, hook: str = "", cluster: str = "") -> None:
        """Count an environmental fault the harness applied itself."""
        with self._lock:
            self.fired.append(Fired(point, hook, cluster, self.context))

    # -- firing -----------------------------------------------------------------
    @staticmethod
    def _matches(armed: Armed, hook: str, cluster: str) -> bool:
        if armed.cluster and cluster and armed.cluster != cluster:
            return False
        return fnmatchcase(hook, armed.hook)

    def fire(self, hook: str, cluster: str = "") -> None:
        """Called at every hook: applies the first armed fault that matches."""
        if not self.enabled:
            return
        with self._lock:
            hit = None
            for armed in self._armed:
                if not self._matches(armed, hook, cluster):
                    continue
                if armed.skip > 0:
                    armed.skip -= 1
                    continue
                armed.times -= 1
                if armed.times <= 0:
                    self._armed.remove(armed)
                hit = armed
                break
            if hit is None:
                return
            self.fired.append(Fired(hit.point, hook, cluster, self.context))
        self._apply(hit, hook, cluster)

    def _apply(self, armed: Armed, hook: str, cluster: str) -> None:
        action = armed.action
        if callable(action):
            action(hook, cluster)
        elif action == "crash":
            raise Crash(armed.point, hook, cluster)
        elif action == "unavailable":
            raise Unavailable(f"{cluster}: no reply within the timeout (fault injected: {armed.point})")
        elif action == "db_drop":
            if self._db_drop is None:
                from broker.faults.install import drop_db_connection

                drop_db_connection()
            else:
                self._db_drop()
        else:
            raise ValueError(f"unknown fault action {action!r}")

    # -- reporting --------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {p.name: 0 for p in CRASH_POINTS}
        for f in self.fired:
            out[f.point] = out.get(f.point, 0) + 1
        return out


@dataclass
class FaultyBackend:
    """A Backend decorator: forwards every call, firing ``<method>:before`` and
    ``<method>:after`` on the plan around it.  ``after`` fires once the destination has
    acted, so a crash or timeout there loses only the reply."""

    inner: object
    plan: FaultPlan
    retime: Callable[[], object] | None = None  # harness clock: re-stamps inventory reports
    calls: dict[str, int] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return getattr(self.inner, "kind", "")

    @property
    def cluster(self) -> str:
        return getattr(self.inner, "cluster", "")

    def _call(self, method: str, *args):
        cluster = self.cluster
        self.calls[method] = self.calls.get(method, 0) + 1
        if cluster in self.plan.unreachable:
            raise Unavailable(f"{cluster}: connection refused (fault injected: cluster unreachable)")
        self.plan.fire(f"{method}:before", cluster)
        result = getattr(self.inner, method)(*args)
        self.plan.fire(f"{method}:after", cluster)
        return result

    def inventory(self) -> InventorySnapshot:
        snap = self._call("inventory")
        if self.retime is not None:
            from dataclasses import replace

            snap = replace(snap, taken_at=self.retime())
        return snap

    def submit(self, spec: WorkloadSpec, workload_id: str, identity: ProjectIdentity) -> str:
        if self.plan.on_submit is not None and self.cluster not in self.plan.unreachable:
            self.plan.on_submit(workload_id, self.cluster)
        return self._call("submit", spec, workload_id, identity)

    def find(self, workload_id: str) -> DestinationJob | None:
        return self._call("find", workload_id)

    def status(self, job_ids: Sequence[str]) -> dict[str, DestinationJob]:
        return self._call("status", job_ids)

    def active_jobs(self) -> list[DestinationJob]:
        return self._call("active_jobs")

    def cancel(self, job_id: str) -> bool:
        return self._call("cancel", job_id)

    def usage(self, since) -> Iterator[UsageRecord]:
        return self._call("usage", since)

    def __getattr__(self, name: str):
        if name in ("inner", "plan", "__setstate__"):
            raise AttributeError(name)
        return getattr(self.inner, name)
