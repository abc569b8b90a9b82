"""Our placement presets, replayed through the broker's real services.

Each job is submitted with ``workload_submit``, placed in a placement pass
(``placing_pass_open`` / ``place_in_pass``, as ``waiting_place_pass`` does: the fleet is
prepared once per instant and shared by every waiting workload placed in it) and
dispatched with ``workload_dispatch``; the broker learns about the fleet only through
``cluster_sync_inventory`` and ``cluster_poll_status``, as it does in production.  The
harness adds nothing to its decisions.  What the replay arranges around it:

* time: the broker's clock (``broker.runtime``) reads the simulator's clock for the whole
  run, so every row (created_at, dispatched_at, audit records) is in simulated time.  Within one
  simulated instant each call advances a microsecond, as a real clock would between
  two writes: the broker's "dispatched after the last inventory report" bookkeeping
  (GPUs promised to its own jobs) relies on that order;
* the replay is the task runner: the services' after-commit hand-offs (place after submit,
  dispatch after reservation, notifications) go to a task sink that drops them and the replay calls the same services
  itself, in a fixed order: waiting workloads oldest first (as ``place_waiting``), and
  a local rejection is retried elsewhere by the dispatch service itself;
* right before it places work, the broker syncs the inventory of every cluster whose
  GPUs changed hands in a way its last report cannot know (a job ended, a queued job
  started, a copy was withdrawn), or whose report is over 4 minutes old (the policy's
  staleness limit is 5): as fresh as the broker can be, which is what the race's
  instant reaction is compared with.  Status is polled at most every 5 simulated
  minutes per cluster (always followed by a sync): it keeps the broker's records
  current but feeds no placement decision;
* a workload is (re)placed only when, on some cluster, the whole gang could be packed
  onto the GPUs free in the simulator within the local quota's room.  The broker's own
  view never has more free GPUs on a node, nor more quota room, than that (it syncs
  before placing and counts what it dispatched since and what still waits there),
  so a skipped attempt is one the broker would have answered "wait": the decision for
  that workload is the same, and most of the database work under load is saved.  (The
  syncs then happen when there is something to place, not after every event.)

Tenants are ``replay-<name>``, each with one project and a global quota so large it
never binds (quota is not what this replay measures).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Sequence

from broker import runtime
from broker.fleet_file import FleetDescription
from broker.models import AttemptState, Workload, WorkloadState
from broker.replay.broker_setup import ReplayTenants, broker_context
from broker.replay.jobs import TENANT_PREFIX, ReplayJob
from broker.replay.loop import ESTIMATOR_EXTRAS, ReplayEnv
from broker.replay.tracker import Start
from broker.services.dispatching.send import workload_dispatch
from broker.services.fleet.inventory import cluster_sync_inventory
from broker.services.placing.cycle import PlacingPass, place_in_pass, placing_pass_open
from broker.services.following.status import cluster_poll_status
from broker.services.submitting.workloads import workload_submit
from broker.placement.wait_estimator import EstimatorReport
from broker.selectors.waits import wait_estimate_report

__all__ = ["BrokerPreset", "broker_context"]  # broker_context: where the runner and tests import it

RESYNC_AFTER_S = 240.0  # inside the default policy's 300 s staleness limit
POLL_EVERY_S = 300.0
PLACEABLE = (WorkloadState.SUBMITTED, WorkloadState.WAITING)


class BrokerPreset:
    """A placement preset of the broker (None: the policy file as it stands)."""

    def __init__(
        self,
        name: str,
        fleet: FleetDescription,
        preset: str | None = None,
        policy_text: str | None = None,
        tenant_prefix: str = TENANT_PREFIX,
    ):
        self.name, self.fleet, self.preset, self.policy_text = name, fleet, preset, policy_text
        # "" (a throwaway database only): tenants keep their own names, so the policy's
        # per-tenant rules apply to them
        self.tenant_prefix = tenant_prefix
        self.cloud_budget: Decimal | None = None  # each tenant's monthly cloud budget (replay_run sets it)
        # the wait estimator's error over this run's started jobs, once it has finished
        self.estimator: EstimatorReport | None = None

    # -- setup ------------------------------------------------------------------------
    def begin(self, env: ReplayEnv) -> None:
        self.env = env
        self.waiting: list[tuple[int, ReplayJob]] = []
        # cluster -> (tracker changes seen, synced at, polled at)
        self._synced: dict[str, tuple[int, float, float]] = {}
        self.tenants = ReplayTenants(self.fleet, self.tenant_prefix, self.cloud_budget)
        self.clusters = self.tenants.clusters

    # -- each instant -----------------------------------------------------------------
    def step(self, now: float, arrivals: Sequence[ReplayJob]) -> tuple[list[Start], set[str]]:
        for job in arrivals:
            self.waiting.append((self._submit(job), job))
        starts: list[Start] = []
        still: list[tuple[int, ReplayJob]] = []
        fresh = False
        shared: PlacingPass | None = None
        for wid, job in self.waiting:  # oldest first, as place_waiting does
            if not self._may_fit(job):  # against the GPUs left by the ones before it
                still.append((wid, job))
                continue
            if not fresh:
                self._refresh_view(now)
                fresh = True
            if shared is None:
                shared = placing_pass_open(now=runtime.now())
            workload = Workload.objects.select_related("tenant", "project", "gpu_class").get(id=wid)
            if self._after(place_in_pass(shared, workload), job, now, starts, still):
                shared = None  # re-placed outside the pass: the next one reads the fleet afresh
        self.waiting = still
        return starts, set()

    def _may_fit(self, job: ReplayJob) -> bool:
        view = self.env.view
        return any(view.summed_free(c, job) >= job.total_gpus and view.admits_now(c, job) for c in view.names)

    def _refresh_view(self, now: float) -> None:
        """Sync (and now and then poll) the clusters the broker's view of is out of date."""
        tracker = self.env.tracker
        for name, cluster_id in self.clusters.items():
            seen, synced_at, polled_at = self._synced.get(name, (-1, -1e18, -1e18))
            if seen == tracker.changes(name) and now - synced_at < RESYNC_AFTER_S:
                continue
            if now - polled_at >= POLL_EVERY_S:
                cluster_poll_status(cluster_id=cluster_id)
                polled_at = now
            cluster_sync_inventory(cluster_id=cluster_id)
            self._synced[name] = (tracker.changes(name), now, polled_at)

    def _submit(self, job: ReplayJob) -> int:
        workload = workload_submit(
            user=self.tenants.user, project_id=self.tenants.project(job.tenant), spec_data=job.spec_data()
        )
        # registered before the job can reach a cluster: it runs as long as in the trace
        self.env.sim.set_duration(workload.uid, job.duration_s, job.final_state)
        return workload.id

    def _after(
        self, workload: Workload, job: ReplayJob, now: float, starts: list[Start], still: list[tuple[int, ReplayJob]]
    ) -> bool:
        """Dispatch a reserved workload, then record where it went (or that it waits).
        True when a destination refused it (it was then placed again on its own)."""
        refused = False
        if workload.state == WorkloadState.RESERVED:
            # a local rejection releases the hold and re-places it on the next cluster
            tried = len(workload.tried_clusters)
            for _ in range(len(self.clusters)):
                workload = workload_dispatch(workload_id=workload.id)
                workload.refresh_from_db()
                if workload.state != WorkloadState.RESERVED:
                    break
            refused = len(workload.tried_clusters) > tried
        if workload.tried_clusters:
            self.env.tracker.outcomes[job.key].rejected = workload.attempts.filter(state=AttemptState.REJECTED).count()
        if workload.state in PLACEABLE:
            still.append((workload.id, job))
        elif workload.destination_job_id and workload.cluster is not None:
            start = self.env.tracker.dispatched(job.key, workload.cluster.name, workload.destination_job_id, now)
            if start is not None:
                starts.append(start)
        return refused

    def on_started(self, starts: Sequence[Start], now: float) -> set[str]:
        for start in starts:
            self.env.tracker.accept(start)
        return set()

    def finish(self, now: float) -> dict[str, int]:
        """Bring the broker's records up to date, so the database tells the same story."""
        for cluster_id in self.clusters.values():
            cluster_poll_status(cluster_id=cluster_id)
        mine = Workload.objects.filter(tenant__slug__startswith=self.tenant_prefix)
        rejected = mine.filter(state=WorkloadState.REJECTED).count()
        extra = {"held at broker": len(self.waiting), "rejected by broker": rejected}
        report = wait_estimate_report(mine)
        # in whole seconds, as stored: the same seed gives the same report
        self.estimator = EstimatorReport.from_dict(report.to_dict()) if report else None
        if self.estimator is not None:  # the learned wait estimator against the waits that followed
            error = self.estimator.overall
            extra.update({key: round(getattr(error, name)) for name, key in ESTIMATOR_EXTRAS.items()})
        return extra
