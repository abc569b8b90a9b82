"""The fault-injection harness: many workloads through submit -> reserve -> dispatch ->
status -> cancel -> reconcile, with a crash or failure at every named point, then the
invariant counters.

The harness *is* the broker's worker and beat: tasks the services enqueue land in its own
queue (so a Redis restart can lose them), it runs them one at a time in a random order
(so interleavings vary), and a ``Crash`` out of a task is a dead worker: the task is
redelivered (acks_late) or lost, and a restarted broker runs its start-up reconciliation.
Researchers submit and cancel through the same services as the pages and the API; an
admin resolves lost-job escalations (and nothing else) as a person would.

Time is virtual on the simulator (the broker's ``runtime.now()`` and the fleet's clock
are one clock), so leases, reservation expiry and the staleness limit pass in
milliseconds.  Against the real Slurm cluster the destination runs on wall time and the
broker's clock runs ahead of it by an offset the harness moves forward.
"""

from __future__ import annotations

import contextlib
import functools
import random
import time
import traceback
from collections import Counter
from datetime import timedelta
from typing import Callable

from django.contrib.auth.models import User
from django.db import InterfaceError, OperationalError, connection

from broker.failpoints import FAILPOINTS
from broker.faults import arming
from broker.faults.environments import PREFIX, SimEnvironment, SlurmEnvironment, harness_tenants, harness_user
from broker.faults.install import captured_tasks, failpoint_hooks, faulty_backends, virtual_clock
from broker.faults.invariants import InvariantWatch
from broker.faults.points import POINTS_BY_NAME, Crash, FaultPlan
from broker.faults.report import HarnessConfig, HarnessReport
from broker.lifecycle import TERMINAL_STATES

__all__ = ["PREFIX", "Harness", "HarnessConfig", "HarnessReport", "SimEnvironment", "SlurmEnvironment", "run_harness"]

ENV_POINTS = {"redis_restarted", "slurmctld_stop_start", "unreachable_past_staleness", "orphan_job"}


# ---------------------------------------------------------------------------------- the harness


class Harness:
    def __init__(self, config: HarnessConfig):
        self.cfg = config
        self.rng = random.Random(config.seed)
        self.env = SlurmEnvironment(self.rng) if config.slurm else SimEnvironment(self.rng)
        enabled = config.points or self.env.supports
        unknown = [p for p in enabled if p not in POINTS_BY_NAME]
        if unknown:
            raise ValueError(f"unknown crash points {unknown}; known: {sorted(POINTS_BY_NAME)}")
        self.points = [p for p in enabled if p in self.env.supports]
        self.plan = FaultPlan(rng=self.rng)
        self.queue: list[tuple[str, tuple]] = []
        self.outages: dict[str, tuple[float, str]] = {}  # cluster -> (ends at, point)
        self.pending_step_faults: list[str] = []
        self.submitted = 0
        self.steps = self.tasks_run = self.tasks_lost = 0
        self.due: dict[str, float] = {}
        self.cycle: list[str] = []
        self.notes: list[str] = []
        self.cancels: list[tuple[float, int, User]] = []

    # -- logging and time ------------------------------------------------------------
    def log(self, text: str) -> None:
        if self.cfg.log:
            self.cfg.log(text)

    def vnow(self) -> float:
        return self.env.now().timestamp()

    # -- setup -------------------------------------------------------------------------
    def _setup_db(self) -> None:
        from broker.services.fleet.policy import current_policy

        policy = current_policy().policy
        self.staleness_s = float(policy.staleness_limit_s)
        self.ttl_s = float(policy.reservation_ttl_s)
        self.gpu_class, self.tenants = harness_tenants(slurm=self.cfg.slurm)
        self.admin = harness_user(f"{PREFIX}admin", is_staff=True)
        self.clusters = self.env.register()
        self.cluster_names = [c.name for c in self.clusters]

    # -- the run ---------------------------------------------------------------------------
    def run(self) -> HarnessReport:
        started = time.monotonic()
        v0 = None
        with contextlib.ExitStack() as stack:
            stack.enter_context(virtual_clock(self.env.now))
            stack.enter_context(captured_tasks(self.queue))
            stack.enter_context(faulty_backends(self.plan, self.env.builders(), self.env.retime))
            stack.enter_context(failpoint_hooks(self.plan))
            stack.callback(self.env.close)
            stack.callback(self._restore_controllers)  # whatever happens, a stopped slurmctld comes back
            if self.cfg.slurm:
                from django.conf import settings

                saved = settings.GPUBROKER_ENABLE_SLURM
                settings.GPUBROKER_ENABLE_SLURM = True
                stack.callback(setattr, settings, "GPUBROKER_ENABLE_SLURM", saved)
            v0 = self.vnow()
            self._setup_db()
            self.watch = InvariantWatch(self.env.truth, workload_prefix=PREFIX)
            self.plan.on_submit = self.watch.on_submit  # each sending is checked for a live reservation
            for cluster in self.clusters:
                self._step(f"inventory {cluster.name}", self._sync(cluster.id))
            self._main()
            self._drain()
            self.watch.after_step(unreachable=set(), step="end", force=True)
            counts = self.watch.final()
            from broker.models import Workload

            states = Counter(Workload.objects.filter(name__startswith=PREFIX).values_list("state", flat=True))
            workloads = sum(states.values())
            virtual = self.vnow() - v0
        faults = {p: n for p, n in self.plan.counts().items() if p in self.points}
        at_failpoints = Counter(f.hook for f in self.plan.fired if f.hook in FAILPOINTS and f.point in self.points)
        if self.cfg.slurm:
            assert isinstance(self.env, SlurmEnvironment)  # cfg.slurm chose it
            self.notes.append(f"slurmctld really stopped and started {self.env.real_restarts} times")
        return HarnessReport(
            config=self.cfg,
            mode=self.env.mode,
            database=connection.vendor,
            faults_by_point=faults,
            counts=counts,
            examples=dict(self.watch.examples),
            workloads=workloads,
            states=dict(states),
            steps=self.steps,
            tasks_run=self.tasks_run,
            tasks_lost=self.tasks_lost,
            elapsed_s=time.monotonic() - started,
            virtual_s=virtual,
            notes=self.notes,
            faults_by_failpoint=dict(at_failpoints),
        )

    @property
    def fired(self) -> int:
        return sum(n for p, n in self.plan.counts().items() if p in self.points)

    def _max_steps(self) -> int:
        return self.cfg.max_steps or (self.cfg.faults * 60 + self.cfg.workloads * 60 + 2000)

    def _main(self) -> None:
        while self.steps < self._max_steps():
            done_faults = self.fired >= self.cfg.faults and (
                self.cfg.faults < len(self.points) or all(self.plan.counts().get(p, 0) for p in self.points)
            )
            done_submits = self.submitted >= self.cfg.workloads
            if done_faults and done_submits:
                break
            self.env.advance(self.rng.uniform(0.5, 3.0) if not self.cfg.slurm else self.rng.uniform(1.0, 6.0))
            self._end_outages()
            self._due_cancels()
            if not done_faults:
                self._maybe_arm()
            self._one_op(done_submits)
            if self.steps % 500 == 0:
                self.log(
                    f"step {self.steps}: {self.submitted} submitted, {self.fired} faults, {len(self.queue)} queued"
                )

    def _one_op(self, done_submits: bool) -> None:
        rng = self.rng
        beat = self._due_beat()
        # submissions keep pace with the faults, so there is traffic for every fault
        behind = (self.submitted / max(1, self.cfg.workloads)) <= (self.fired / max(1, self.cfg.faults)) + 0.05
        if not done_submits and behind and rng.random() < 0.5:
            self._submit()
        elif beat:
            self._beat(beat)
        elif self.queue and rng.random() < 0.9:
            self._run_task()
        elif self._cancel_fault_waiting() and rng.random() < 0.05:
            self._cancel_running()
        elif done_submits and self.submitted < self.cfg.workloads * 1.5 and rng.random() < 0.02:
            self._submit()  # faults still to inject and no traffic left: a few more workloads
        elif rng.random() < 0.05:
            self._admin_pass()
        elif not done_submits and rng.random() < 0.3:
            self._submit()
        else:
            self.env.advance(rng.uniform(1, 10))

    # -- researcher, admin -------------------------------------------------------------------
    def _submit(self) -> None:
        from broker.services.submitting.workloads import workload_submit

        tenant, project, user = self.rng.choice(self.tenants)
        minutes, command = self.env.job_seconds()
        gpus = self.rng.choice((1, 1, 2, 2, 4, 8)) if not self.cfg.slurm else self.rng.choice((1, 1, 2, 4))
        workers = self.rng.choice((1, 1, 1, 2))
        spec = {
            "name": f"{PREFIX}w{self.submitted}",
            "command": command,
            "gpu_class": "a100-80gb",
            "gpus_per_worker": gpus,
            "workers": workers,
            "time_limit_minutes": minutes,
            "checkpointable": self.rng.random() < 0.5,
            "cpus_per_worker": 1,
            "memory_gb_per_worker": 1,
        }
        self.submitted += 1
        created = []
        self._step(
            f"submit {spec['name']}",
            lambda: created.append(workload_submit(user=user, project_id=project.id, spec_data=spec)),
        )
        if created and self.rng.random() < self.cfg.cancel_share:
            # the researcher changes their mind at some point of the workload's life
            later = self.rng.choice((5, 30, 120, 400)) * self.rng.uniform(0.5, 1.5)
            self.cancels.append((self.vnow() + later, created[0].id, user))

    def _cancel_fault_waiting(self) -> bool:
        """A cancellation fault is armed: a researcher cancels a running workload now and then."""
        return any(a.hook.startswith("cancel.") for a in self.plan.armed)

    def _cancel_running(self) -> None:
        from broker.models import Workload

        rows = list(
            Workload.objects.filter(name__startswith=PREFIX, state__in=("queued", "running"))
            .order_by("id")
            .values_list("id", "tenant_id")[:200]
        )
        if rows:
            row = self.rng.choice(rows)
            user = next(u for t, _, u in self.tenants if t.id == row[1])
            self.cancels.append((self.vnow(), row[0], user))

    def _due_cancels(self) -> None:
        from broker.services.submitting.workloads import workload_cancel

        now = self.vnow()
        for item in [c for c in self.cancels if c[0] <= now]:
            self.cancels.remove(item)
            _, wid, user = item
            self._step(f"cancel {wid}", functools.partial(workload_cancel, user=user, workload_id=wid))

    def _admin_pass(self, min_age_s: float = 120.0) -> None:
        """An admin works the escalation queue: a lost job is checked and declared dead."""
        from broker.models import Escalation
        from broker.services.following.escalations import escalation_resolve

        cutoff = self.env.now() - timedelta(seconds=min_age_s)
        for esc_id in (
            Escalation.objects.filter(kind="lost_job", created_at__lt=cutoff)
            .exclude(state="resolved")
            .values_list("id", flat=True)
        ):
            self._step(
                f"admin resolves {esc_id}",
                functools.partial(
                    escalation_resolve,
                    user=self.admin,
                    escalation_id=esc_id,
                    outcome="checked at the cluster: the run is gone",
                    old_run_dead=True,
                ),
            )

    # -- the worker -------------------------------------------------------------------------
    def _task_fn(self, name: str, args: tuple) -> Callable[[], object]:
        from broker.services.following.cancel import cancel_propagate
        from broker.services.dispatching.send import workload_dispatch
        from broker.services.placing.cycle import workload_place

        fns = {
            "place_workload": lambda wid: workload_place(workload_id=wid),
            "dispatch_workload": lambda wid: workload_dispatch(workload_id=wid),
            "propagate_cancel": lambda wid: cancel_propagate(workload_id=wid),
        }
        return lambda: fns[name](*args)

    def _run_task(self) -> None:
        name, args = self.queue.pop(self.rng.randrange(len(self.queue)))
        self.tasks_run += 1
        armed = self._arm_step_faults(("worker_killed_mid_task", "postgres_connection_dropped"))
        outcome = self._step(f"{name}{args}", self._task_fn(name, args))
        self._disarm_step_faults(armed)
        if outcome in ("crash", "db"):
            if outcome == "crash" and self.rng.random() < 0.5:
                self.queue.append((name, args))  # acks_late: the broker redelivers it
            else:
                self.tasks_lost += 1  # a failed task is acked: it is gone
            if self.rng.random() < 0.4:
                self._restart()

    def _restart(self) -> None:
        """The broker comes back: its start-up pass is a reconciliation."""
        from broker.services.following.reconcile import reconcile_fleet

        self._step("start-up reconcile", reconcile_fleet)

    def _arm_step_faults(self, names: tuple[str, ...]) -> list:
        armed = []
        for name in names:
            if name in self.pending_step_faults:
                self.pending_step_faults.remove(name)
                spec = POINTS_BY_NAME[name]
                armed.append(self.plan.arm(name, hook=spec.hook, action=spec.action, skip=self.rng.randrange(0, 2)))
        return armed

    def _disarm_step_faults(self, armed: list) -> None:
        """A step fault that found no hook in this step waits for the next one."""
        for a in armed:
            if a in self.plan.armed:
                self.plan.disarm(a)
                if a.point not in self.pending_step_faults:
                    self.pending_step_faults.append(a.point)

    # -- beat --------------------------------------------------------------------------------
    INTERVALS = {"inventory": 30.0, "status": 10.0, "place": 10.0, "reconcile": 60.0, "admin": 300.0}

    def _due_beat(self) -> str | None:
        now = self.vnow()
        for name, interval in self.INTERVALS.items():
            if now >= self.due.get(name, 0):
                self.due[name] = now + interval
                return name
        return None

    def _sync(self, cluster_id: int) -> Callable[[], object]:
        from broker.services.fleet.inventory import cluster_sync_inventory

        return lambda: cluster_sync_inventory(cluster_id=cluster_id)

    def _beat(self, name: str) -> None:
        from broker.models import Workload
        from broker.services.following.reconcile import reconcile_fleet
        from broker.services.following.status import cluster_poll_status

        if name == "inventory":
            for cluster in self.clusters:
                self._step(f"inventory {cluster.name}", self._sync(cluster.id))
        elif name == "status":
            for cluster in self.clusters:
                self._step(f"status {cluster.name}", functools.partial(cluster_poll_status, cluster_id=cluster.id))
        elif name == "place":
            queued = {args[0] for task, args in self.queue if task == "place_workload"}
            for wid in (
                Workload.objects.filter(state__in=("submitted", "waiting"))
                .order_by("created_at")
                .values_list("id", flat=True)[:500]
            ):
                if wid not in queued:
                    self.queue.append(("place_workload", (wid,)))
        elif name == "reconcile":
            armed = self._arm_step_faults(("during_reconcile",))
            self._step("reconcile", reconcile_fleet)
            self._disarm_step_faults(armed)
        elif name == "admin":
            self._admin_pass()

    # -- faults ------------------------------------------------------------------------------
    # -- arming faults and outages (broker/faults/arming.py) ---------------------------------
    _next_point = arming.next_point
    _maybe_arm = arming.maybe_arm
    _begin_outage = arming.begin_outage
    _restore_controllers = arming.restore_controllers
    _end_outages = arming.end_outages

    # -- one step ---------------------------------------------------------------------------
    def _step(self, label: str, fn: Callable[[], object]) -> str:
        self.steps += 1
        self.plan.context = label
        unreachable = set(self.plan.unreachable)
        outcome = "ok"
        try:
            fn()
        except Crash:
            outcome = "crash"
        except (OperationalError, InterfaceError):
            outcome = "db"
            connection.close()  # as Celery's Django fixup does after a failed task
        except Exception as exc:  # noqa: BLE001 - any other escape is a finding
            outcome = "error"
            self.watch.note("errors", f"{label}: {exc!r}\n{traceback.format_exc(limit=6)}")
            with contextlib.suppress(Exception):
                connection.close()
        self.plan.context = ""
        try:
            self.watch.after_step(unreachable=unreachable, step=label)
        except (OperationalError, InterfaceError):
            connection.close()
            self.watch.after_step(unreachable=unreachable, step=label)
        return outcome

    # -- the end ----------------------------------------------------------------------------
    def _drain(self, rounds: int = 0) -> None:
        """Faults off; the broker runs until every workload has ended or is escalated."""
        from broker.models import Escalation, Workload
        from broker.services.following.reconcile import reconcile_fleet

        self.plan.disarm()
        self.pending_step_faults.clear()
        self._restore_controllers()
        self.outages.clear()
        self.plan.unreachable.clear()
        step_s = 120.0 if not self.cfg.slurm else 2.0
        rounds = rounds or (4000 if not self.cfg.slurm else 400)
        for i in range(rounds):
            self.env.advance(step_s)
            if self.cfg.slurm:
                time.sleep(1.0)
            self._due_cancels()
            for name in ("inventory", "status", "place", "reconcile"):
                self._beat(name)
            n = 0
            while self.queue and n < 2000:
                self._run_task()
                n += 1
            if i % 10 == 0:
                self._admin_pass(min_age_s=0)
            live = Workload.objects.filter(name__startswith=PREFIX).exclude(state__in=TERMINAL_STATES)
            escalated = Escalation.objects.filter(kind="lost_job").exclude(state="resolved").values("workload_id")
            if not self.queue and not live.exclude(id__in=escalated).exists():
                break
            if i % 50 == 0:
                self.log(f"drain round {i}: {live.count()} workloads live")
        else:
            self.notes.append(f"drain stopped after {rounds} rounds")
        self.env.advance(self.ttl_s + 120)
        self._step("final reconcile", reconcile_fleet)
        self._step("final reconcile", reconcile_fleet)


def run_harness(config: HarnessConfig) -> HarnessReport:
    return Harness(config).run()
