"""One simulated control plane: nodes, a FIFO queue, local admission and a clock.

Scheduling is lazy and event-driven: every call first replays what happened since the last one
(jobs ending at their exact instants, queued jobs starting in the room they leave), so results do
not depend on how often anyone looks.  Fault switches act in ``SimulatorBackend``, not here."""

from __future__ import annotations

import itertools
import threading
from dataclasses import replace
from datetime import datetime
from typing import Iterator, Mapping, Sequence

from broker.backends.base import (
    DestinationJob,
    InventorySnapshot,
    JobState,
    LogPage,
    LogsGone,
    ProjectIdentity,
    Reason,
    UsageRecord,
)
from broker.backends.sim import admission, backfill, elastic, levers, queues, report, snapshot
from broker.backends.sim.clock import SimClock
from broker.backends.sim.live import LiveJobs
from broker.backends.sim.model import (
    request_from_spec,
    FLAVORS,
    OWNER,
    Faults,
    JobRequest,
    NodeGroup,
    Partition,
    SimJob,
    SimNode,
)
from broker.backends.sim.outcome import GPU_CHECK_S, TIMEOUT_RAW, gpu_check_fails, log_page
from broker.backends.sim.plan import Plan
from broker.backends.sim.runtime import Runtimes
from broker.spec import WorkloadSpec


class SimulatedCluster:
    kind = "simulator"

    def __init__(
        self,
        name: str,
        flavor: str,
        nodes: Sequence[SimNode] = (),
        *,
        node_groups: Sequence[NodeGroup] = (),
        partitions: Sequence[Partition] = (),
        quotas: Mapping[str, int] | None = None,
        gang_scheduler: str = "",
        clock: SimClock | None = None,
        runtimes: Runtimes | None = None,
        queueing: str = "strict",
        queue_quotas: Sequence[queues.QueueQuota] = (),
        queue_caps: Mapping[str, int] | None = None,
        slurm_limits: tuple[Mapping[str, int], Mapping[str, int]] = ({}, {}),
        share_points: Mapping[str, float] | None = None,
        completing_s: float = 0.0,
    ):
        if flavor not in FLAVORS:
            raise ValueError(f"flavor must be one of {', '.join(FLAVORS)}, not {flavor!r}")
        if queueing not in backfill.QUEUEING:
            raise ValueError(f"queueing must be one of {', '.join(backfill.QUEUEING)}")
        # strict: FIFO, a waiting job holds back its pools; backfill: see sim.backfill
        self.queueing = queueing
        self.name, self.flavor, self.gang_scheduler = name, flavor, gang_scheduler
        self.clock = clock or SimClock()
        self.runtimes = runtimes or Runtimes()
        self.faults = Faults()
        self.quotas: dict[str, int] = dict(quotas or {})
        self.queue_quotas = tuple(queue_quotas)  # Kueue ClusterQueues and cohorts (sim.queues)
        self.queue_caps = dict(queue_caps or {})  # Volcano Queues' GPU capability
        self.qos_caps, self.account_caps = dict(slurm_limits[0]), dict(slurm_limits[1])  # Slurm: by QoS, account
        self._nodes = list(nodes) + self._build_groups(node_groups)
        self._check_node_names()
        self._by_name = {n.name: n for n in self._nodes}
        self._by_pool = admission.pools_of(self._nodes)  # a node's pool never changes
        self._elastic = [n for n in self._nodes if n.elastic]  # sim.elastic
        for node in self._elastic:  # its delays pass on the cluster's clock, as run times do
            node.provisioning_s, node.idle_release_s = (self.clock.scaled(node.provisioning_s),
                                                        self.clock.scaled(node.idle_release_s))  # fmt: skip
        self.partitions = self._init_partitions(partitions)
        self._jobs: dict[str, SimJob] = {}
        self.share_points = dict(share_points or {})  # Slurm's fair share per account (sim.live)
        # pending or running: what scheduling looks at; ``completing_s``: how long an ended
        # job keeps its GPUs (Slurm's COMPLETING: epilog, the node's report), unscaled
        self._live = LiveJobs(self.share_points, self.clock.scaled(completing_s))
        self._seq = itertools.count(1000)
        self._cursor = self._created = self.clock.seconds
        self._lock = threading.RLock()
        self.version = 0  # bumped when a job is submitted, starts or leaves (the replay elides on it)

    def number_jobs_from(self, first: int) -> None:
        """Number the next jobs from ``first`` on (never back): a restarted demo's job ids go on."""
        with self._lock:
            upcoming = next(self._seq)
            self._seq = itertools.count(max(first, upcoming))

    # --- construction ------------------------------------------------------------------

    def _build_groups(self, groups: Sequence[NodeGroup]) -> list[SimNode]:
        nodes: list[SimNode] = []
        taken: dict[str, int] = {}
        for group in groups:
            # two groups with the same prefix number their nodes on from each other
            built = group.build(start_index=taken.get(group.prefix, 0) + 1)
            taken[group.prefix] = taken.get(group.prefix, 0) + len(built)
            nodes += built
            if group.quota is not None and built:
                flavor = built[0].pool
                self.quotas[flavor] = self.quotas.get(flavor, 0) + group.quota
        return nodes

    def _check_node_names(self) -> None:
        names = [n.name for n in self._nodes]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"cluster {self.name}: duplicate node names {dupes}")

    def _init_partitions(self, partitions: Sequence[Partition]) -> dict[str, Partition]:
        parts = {p.name: p for p in partitions}
        if not parts:
            parts = {"gpu": Partition("gpu", default=True)}
        default = next((p for p in parts.values() if p.default), next(iter(parts.values())))
        for node in self._nodes:
            node.partition = node.partition or default.name  # Slurm's Default=YES
        return parts

    # --- the protocol (fault-free) -----------------------------------------------------

    @property
    def cluster(self) -> str:
        return self.name

    @property
    def owner(self) -> str:
        return OWNER[self.flavor]

    def tick(self) -> None:
        """Replay everything up to the clock's now."""
        with self._lock:
            self._catch_up()

    def inventory(self) -> InventorySnapshot:
        with self._lock:
            self._catch_up()
            return InventorySnapshot(
                cluster=self.name, taken_at=self.clock.at(self._cursor), pools=self._pools(), queue=self._queue_stats()
            )

    def submit(
        self, spec: WorkloadSpec, workload_id: str | None, identity: ProjectIdentity, duration_s: float | None = None
    ) -> str:
        """Accept a job (raises Rejected for Slurm's submit-time refusals); no workload id: a local user's."""
        req = request_from_spec(spec, one_per_node=self.flavor == "slurm")
        with self._lock:
            self._catch_up()
            partition = self._partition_for(req, identity.queue)
            account = self._account(identity)
            namespace = identity.k8s_namespace or identity.project or "default"
            job = self._new_job(req, workload_id, account, partition, namespace, duration_s)
            if self.faults.loses_job:
                job.doomed, self.faults.loses_job = True, False
            self._schedule()
            self._scale()
            return job.job_id

    def find(self, workload_id: str) -> DestinationJob | None:
        with self._lock:
            self._catch_up()
            mine = [j for j in self._jobs.values() if j.workload_id == workload_id and not j.lost]
            if not mine:
                return None
            # a live job wins over an ended one; then the newest
            return self._view(max(mine, key=lambda j: (j.active, j.seq)))

    def status(self, job_ids: Sequence[str]) -> dict[str, DestinationJob]:
        with self._lock:
            self._catch_up()
            return {
                jid: self._view(self._jobs[jid]) for jid in job_ids if jid in self._jobs and not self._jobs[jid].lost
            }

    def active_jobs(self) -> list[DestinationJob]:
        with self._lock:
            self._catch_up()
            return [self._view(j) for j in self._jobs.values() if j.active]

    def cancel(self, job_id: str) -> bool:
        with self._lock:
            self._catch_up()
            job = self._jobs.get(job_id)
            if job is None or job.lost:
                return False
            if not job.state.ended:
                self._end_now(job, JobState.CANCELLED, "CANCELLED by 0" if self.flavor == "slurm" else "Deleted")
            return True

    def _end_now(self, job: SimJob, state: JobState, end_raw: str) -> None:
        """The job ends at this instant (cancelled, preempted): its GPUs go to the next."""
        self._release(job)
        job.state, job.ended_at, job.end_raw = state, self._cursor, end_raw
        job.reason, job.raw_reason = Reason.NONE, ""
        self._schedule()

    def usage(self, since: datetime) -> Iterator[UsageRecord]:
        with self._lock:
            self._catch_up()
            since_s = self.clock.to_seconds(since)
            records = [
                self._usage_record(j)
                for j in self._jobs.values()
                if j.started_at is not None and not j.lost and (j.ended_at is None or j.ended_at >= since_s)
            ]
        return iter(records)

    def logs(
        self, job_id: str, *, worker: str = "", offset: int | None = None, limit: int = 200, tail: int | None = None
    ) -> LogPage:
        with self._lock:
            self._catch_up()
            job = self._jobs.get(job_id)
            if job is None or job.lost:
                raise LogsGone(f"{self.name} no longer has job {job_id}")
            return log_page(
                job, self.flavor, self._run_time(job) or 0.0, worker=worker, offset=offset, limit=limit, tail=tail
            )

    # --- test and demo levers ----------------------------------------------------------

    def set_faults(self, **changes: object) -> Faults:
        """Flip fault switches: unreachable, slow_s, rejects, loses_job, accepts_but_times_out."""
        with self._lock:
            self.faults.set(**changes)
            return self.faults

    def clear_faults(self) -> None:
        with self._lock:
            self.faults.clear()

    def take_fault(self, name: str) -> bool:
        """Consume a one-shot switch; True when it was set."""
        with self._lock:
            armed = bool(getattr(self.faults, name))
            setattr(self.faults, name, False)
            return armed

    def node(self, name: str) -> SimNode:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"cluster {self.name} has no node {name!r}") from None

    @property
    def nodes(self) -> list[SimNode]:
        return list(self._nodes)

    def next_event(self) -> float | None:  # when it next changes by itself (an end, a gang's pods, a node)
        with self._lock:
            times = (self._live.next_event(self._cursor), elastic.next_event(self._elastic))
            return min((t for t in times if t is not None), default=None)

    def jobs(self, workload_id: str | None = None) -> list[SimJob]:
        """Every job ever submitted, lost ones included (inspection only)."""
        with self._lock:
            self._catch_up()
            return [j for j in self._jobs.values() if workload_id is None or j.workload_id == workload_id]

    def job(self, job_id: str) -> SimJob:
        with self._lock:
            self._catch_up()
            return self._jobs[job_id]

    # --- scheduling --------------------------------------------------------------------

    def _partition_for(self, req: JobRequest, queue: str) -> str:
        if self.flavor != "slurm":  # Kueue: the LocalQueue; Volcano: the Queue
            return queue if self.queue_quotas or self.queue_caps else ""
        return admission.slurm_partition(self._nodes, self.partitions, req, queue)

    def _account(self, identity: ProjectIdentity) -> str:
        if self.flavor == "slurm":
            return identity.slurm_account or identity.project
        return identity.k8s_namespace or identity.project

    def _new_job(
        self,
        req: JobRequest,
        workload_id: str | None,
        account: str,
        partition: str,
        namespace: str,
        duration_s: float | None = None,
    ) -> SimJob:
        seq = next(self._seq)
        job_id = str(seq) if self.flavor == "slurm" else f"{namespace}/{req.name}-{seq}"
        nominal, final = self.runtimes.for_job(workload_id, req.time_limit_s)
        if duration_s is not None:
            nominal = duration_s
        job = SimJob(
            job_id=job_id,
            workload_id=workload_id,
            request=req,
            account=account,
            seq=seq,
            submitted_at=self._cursor,
            run_s=self.clock.scaled(nominal),
            final_state=final,
            partition=partition,
        )
        if req.time_limit_s is not None and nominal > req.time_limit_s:
            # the scheduler kills a job at its limit, whatever the trace said
            job.run_s = self.clock.scaled(req.time_limit_s)
            job.final_state, job.end_raw = JobState.FAILED, TIMEOUT_RAW[self.flavor]
        self._jobs[job_id] = job
        self._live.add(job)
        self.version += 1
        return job

    def _catch_up(self) -> None:
        now = self.clock.seconds
        self._vanish_seen_doomed()
        while True:
            self._schedule()
            self._scale()
            nxt = min(
                (t for t in (self._live.next_event(self._cursor), elastic.next_event(self._elastic)) if t is not None),
                default=None,
            )
            if nxt is None or nxt > now:
                break
            self._cursor = max(self._cursor, nxt)
            for job in self._live.ending_by(self._cursor):
                self._finish(job)
            self.version += elastic.settle(self._elastic, self._cursor)
        self._cursor = max(self._cursor, now)

    def _schedule(self) -> None:
        """One pass at the cursor in queue order: start what fits, record why the rest waits."""
        pending = self._live.pending()
        if not pending:
            return  # nothing to start
        # ctx.used is the live count: each start below adds its GPUs to it
        ctx = self._context(pending)
        admit = admission.ADMIT[self.flavor]
        if self.queue_quotas:  # Kueue's cycles: one head per ClusterQueue at a time (sim.queues)
            self._kueue_cycles(pending, ctx, admit)
            return
        plan = self._plan()
        # backfill only: a shape that could not start in this pass cannot start later in it
        # (GPUs only get taken), so its later jobs get the same verdict without a search
        failed: dict[tuple, admission.Verdict] = {}
        for job in pending:
            shape = backfill.shape_of(job) if self.queueing == "backfill" else None
            if shape is not None and shape in failed:
                job.reason, job.raw_reason = failed[shape].reason, failed[shape].raw
                self._hold(plan, job, failed[shape])
                continue
            verdict = admit(job, ctx)
            if verdict.placement is None and verdict.reason is Reason.CAPACITY and self._preempt_for(job, verdict):
                verdict = admit(job, ctx)
            if verdict.placement is not None and plan is not None and not plan.allows(job, verdict.placement):
                # it fits now, but on GPUs planned for a job ahead of it: elsewhere, or wait
                verdict = replace(verdict, placement=plan.place_now(job, self._pool_nodes(job, verdict)))
                if verdict.placement is None:
                    job.reason, job.raw_reason = Reason.CAPACITY, "Priority"
                    self._hold(plan, job, verdict, waits=True)
                    continue
            if verdict.placement is not None:
                self._start(job, verdict, plan)
                continue
            job.reason, job.raw_reason = verdict.reason, verdict.raw
            if shape is not None:  # it did not pack at all: no time limit changes that
                failed[shape] = verdict
            if verdict.blocks and self.queueing == "strict":
                ctx.blocked.update(verdict.pools)
            elif verdict.blocks:
                self._hold(plan, job, verdict)
        for job in ctx.enqueued:  # Volcano: a pass is due when their pods exist
            self._live.wake_at(job)

    def _scale(self) -> None:
        """Elastic pools (sim.elastic): nodes for what waits, idle clocks for what runs."""
        if self._elastic:
            self.version += elastic.request_for(self._live.pending(), self._by_pool, self._cursor)
            elastic.settle(self._elastic, self._cursor)

    def _limit_s(self, job: SimJob) -> float:
        return float("inf") if job.request.time_limit_s is None else self.clock.scaled(job.request.time_limit_s)

    def _plan(self) -> Plan | None:
        """Slurm's backfill plan for this pass (sim.plan); none for the other flavors."""
        if self.flavor != "slurm" or self.queueing != "backfill":
            return None
        return Plan(self._nodes, self._live.running(), self._cursor, self._limit_s)

    def _pool_nodes(self, job: SimJob, verdict: admission.Verdict) -> list[SimNode]:
        return [n for p in verdict.pools for n in self._by_pool.get(p, ()) if n.partition == job.partition]

    def _hold(self, plan: Plan | None, job: SimJob, verdict: admission.Verdict, waits: bool = False) -> None:
        if plan is not None and (verdict.blocks or waits):
            plan.hold(job, self._pool_nodes(job, verdict))

    def _start(self, job: SimJob, verdict: admission.Verdict, plan: Plan | None = None) -> None:
        assert verdict.placement is not None
        for node_name, gpus in verdict.placement:
            self.node(node_name).allocated += gpus
        job.placement, self.version = list(verdict.placement), self.version + 1
        if plan is not None:
            plan.started(job)
        job.state, job.started_at = JobState.RUNNING, self._cursor
        job.first_started_at = self._cursor if job.first_started_at is None else job.first_started_at
        job.reason, job.raw_reason = Reason.NONE, ""
        if not job.placement:  # admitted on quota, its pods never placed: out at its deadline
            job.run_s, job.final_state, job.end_raw = self._limit_s(job), JobState.FAILED, TIMEOUT_RAW[self.flavor]
            self._live.started(job, verdict.pool)
            return
        first = self.node(job.placement[0][0])
        job.gpu_model, job.units_per_gpu = first.gpu_model, first.units_per_gpu
        gpu_check_fails(job, {n.name for n in self._nodes if n.gpus_broken}, self.clock.scaled(GPU_CHECK_S))
        self._live.started(job, self.node(job.placement[0][0]).pool)

    def _release(self, job: SimJob) -> None:
        """Free the job's GPUs; it leaves the live set (it is ending or vanishing)."""
        if job.state is JobState.RUNNING and not job.lost:
            for node_name, gpus in job.placement:
                node = self.node(node_name)
                node.allocated = max(0, node.allocated - gpus)
        self._live.remove(job)
        self.version += 1

    def _finish(self, job: SimJob) -> None:
        self._release(job)
        if job.doomed:
            job.lost = True  # it ends without a trace: no state, no accounting record
            return
        job.state, job.ended_at = job.final_state, job.ends_at

    def _vanish_seen_doomed(self) -> None:
        for job in self._live.doomed():
            if job.seen_running:
                self._release(job)
                job.lost = True

    _preempt_for = queues.preempt_for
    _kueue_cycles = queues.cycles
    preempt = queues.preempt
    _context = admission.context_of

    # --- levers (broker/backends/sim/levers.py) ----------------------------------------
    kill_for_memory = levers.kill_for_memory
    claim_node_by = levers.claim_node_by
    set_node = levers.set_node
    break_gpus = levers.break_gpus
    set_quota = levers.set_quota
    inject_foreign_job = levers.inject_foreign_job
    billed_node_seconds = levers.billed_node_seconds
    idle_billed_gpu_seconds = levers.idle_billed_gpu_seconds

    # --- saved state (broker/backends/sim/snapshot.py): the demo keeps its jobs -------
    to_json = snapshot.to_json
    load_json = snapshot.load_json

    # --- reports (broker/backends/sim/report.py) ---------------------------------------
    _view = report.view
    _run_time = report.run_time
    _usage_record = report.usage_record
    _pools = report.pools
    _queue_stats = report.queue_stats

    def __repr__(self) -> str:
        return f"<SimulatedCluster {self.name} ({self.flavor}) {len(self._nodes)} nodes>"
