"""One of our placement presets, run as production runs it: the broker's side of the
production-loop replay (``broker/replay/production.py`` is the harness around it).

In production, Celery beat starts periodic tasks (``CELERY_BEAT_SCHEDULE``) and workers run
them and the follow-ups the services enqueue after each commit (place a workload just
submitted, dispatch a reserved one, propagate a cancel).  Here the harness plays beat: it
calls ``sync``, ``poll``, ``place_pass``, ``withdraw_holds`` and ``reconcile`` on their
intervals; and this class is the worker: every follow-up goes to its queue, and ``work`` runs
them in order, as the same task bodies Celery would run.  The broker learns about the fleet
only from its own inventory syncs and status polls.

Only the broker's own services and models: this module reads nothing of the simulator, the
harness's tracker or its view of the fleet, and sets no run time (the harness does, as a
cluster's users do by running their code); ``tests/conventions`` checks its imports.
"""

from __future__ import annotations

from collections import deque
from datetime import datetime
from decimal import Decimal
from typing import Any, Callable

from django.conf import settings
from django.db.models import Min

from broker import tasks
from broker.fleet_file import FleetDescription
from broker.models import Cluster, GpuPool, Reservation, ReservationState, Workload, WorkloadState
from broker.placement.wait_estimator import EstimatorReport
from broker.replay.broker_setup import ReplayTenants
from broker.replay.jobs import TENANT_PREFIX, ReplayJob
from broker.selectors.waits import wait_estimate_report
from broker.services.fleet.inventory import cluster_sync_inventory
from broker.services.following.reconcile import reconcile_fleet
from broker.services.following.status import cluster_poll_status
from broker.services.placing.cycle import PassReport, waiting_place_pass
from broker.services.placing.moving import queued_moves
from broker.services.placing.preempting import broker_preemption_pass
from broker.services.placing.withdraw import policy_holds_withdraw
from broker.services.submitting.workloads import workload_submit

# the follow-ups a worker runs, by task name (``broker.tasks``); those that decide nothing
# about where and when a job runs are dropped, and any other name stops the replay, so a
# new kind of follow-up is looked at before a replay can ignore it
WORKED = frozenset({"place_workload", "place_waiting", "dispatch_workload", "dispatch_workloads", "propagate_cancel"})
DROPPED = frozenset({"notify_workload_event", "deliver_webhook", "send_mail", "run_impact"})
# statuses in which a workload still has something ahead of it
LIVE = (WorkloadState.SUBMITTED, WorkloadState.WAITING, WorkloadState.RESERVED, WorkloadState.DISPATCHING)


class UnknownFollowUp(RuntimeError):
    pass


class ProductionBroker:
    """A placement preset (None: the policy file as it stands) with its own worker queue."""

    def __init__(
        self,
        name: str,
        fleet: FleetDescription,
        preset: str | None = None,
        policy_text: str | None = None,
        tenant_prefix: str = TENANT_PREFIX,
        cloud_budget: Decimal | None = None,
    ):
        self.name, self.fleet, self.preset, self.policy_text = name, fleet, preset, policy_text
        self.tenant_prefix, self.cloud_budget = tenant_prefix, cloud_budget
        self.estimator: EstimatorReport | None = None
        self.queue: deque[tuple[str, tuple[Any, ...]]] = deque()

    def begin(self) -> None:
        self.tenants = ReplayTenants(self.fleet, self.tenant_prefix, self.cloud_budget)
        self.clusters = self.tenants.clusters

    # -- what researchers do ----------------------------------------------------------------
    def submit(self, job: ReplayJob) -> str:
        """Submit through the service, as the API does; the workload's uid (what the
        destination job carries)."""
        workload = workload_submit(
            user=self.tenants.user, project_id=self.tenants.project(job.tenant), spec_data=job.spec_data()
        )
        return str(workload.uid)

    # -- the beat's tasks, one call per cluster where the task fans out ---------------------
    def sync(self, cluster: str) -> bool:
        """``sync_inventory``; True when the report changed what placement reads."""
        before = Cluster.objects.values_list("capacity_changed_at", flat=True).get(id=self.clusters[cluster])
        after = cluster_sync_inventory(cluster_id=self.clusters[cluster]).capacity_changed_at
        return after != before

    def poll(self, cluster: str) -> int:
        """``poll_status``: how many workloads changed."""
        return cluster_poll_status(cluster_id=self.clusters[cluster])

    def place_pass(self) -> PassReport:
        """``place_waiting``: one pass (the task queues another when it left workloads due)."""
        report = waiting_place_pass()
        if report.left_due:
            self.queue.append(("place_waiting", ()))
        return report

    def preempt(self) -> int:
        """``preempt_for_waiting``: for how many waiting workloads it made room."""
        return broker_preemption_pass()

    def withdraw_holds(self) -> int:
        return policy_holds_withdraw()

    def move_queued(self) -> int:
        """``move_queued``: how many jobs waiting at one cluster moved to another."""
        return queued_moves()

    def reconcile(self) -> bool:
        """``reconcile``: True when it changed or queued anything."""
        r = reconcile_fleet(
            budget_s=settings.GPUBROKER_RECONCILE_BUDGET_S, max_follow_ups=settings.GPUBROKER_RECONCILE_MAX_FOLLOW_UPS
        )
        return bool(r.stale_clusters or r.expired or r.confirmed or r.released or r.redispatched or r.cancels_retried)

    # -- the worker ------------------------------------------------------------------------
    def sink(self, task_name: str, *args: Any) -> None:
        """Where the services' follow-ups go after their commit (the runtime's task sink)."""
        if task_name in WORKED:
            self.queue.append((task_name, args))
        elif task_name not in DROPPED:
            raise UnknownFollowUp(f"a follow-up the replay does not know: {task_name}{args}")

    def work(self) -> int:
        """Run the queued follow-ups, and those they queue, in order; how many ran."""
        ran = 0
        while self.queue:
            name, args = self.queue.popleft()
            task: Callable[..., object] = getattr(tasks, name)
            task(*args)  # the task's own body, as a Celery worker runs it
            ran += 1
        return ran

    def holding(self, uids: list[str]) -> set[str]:
        """Which of these workloads hold a pool to drain (a big gang's hold)."""
        return set(GpuPool.objects.filter(held_for__in=uids).values_list("held_for", flat=True)) if uids else set()

    def next_reservation_expiry(self) -> datetime | None:
        """When the first live reservation still held unconfirmed runs out: reconcile confirms
        or expires it then (the other rule of the broker that reads the clock)."""
        found: datetime | None = Reservation.objects.filter(state=ReservationState.ACTIVE).aggregate(
            at=Min("expires_at")
        )["at"]
        return found

    def live(self) -> int:
        """Workloads still waiting, reserved or on their way to a cluster."""
        return Workload.objects.filter(tenant__slug__startswith=self.tenant_prefix, state__in=LIVE).count()

    def finish(self) -> dict[str, int]:
        """Bring the records up to date; the counters the report adds."""
        for cluster_id in self.clusters.values():
            cluster_poll_status(cluster_id=cluster_id)
        mine = Workload.objects.filter(tenant__slug__startswith=self.tenant_prefix)
        extra = {
            "held at broker": mine.filter(state__in=(WorkloadState.SUBMITTED, WorkloadState.WAITING)).count(),
            "rejected by broker": mine.filter(state=WorkloadState.REJECTED).count(),
        }
        report = wait_estimate_report(mine)
        self.estimator = EstimatorReport.from_dict(report.to_dict()) if report else None
        return extra
