"""Local admission of one pending job, in each control plane's own words.

Every verdict carries the normalised reason and the raw text a real scheduler would
show (Slurm's squeue reason, Kueue's flavor-assignment message, Volcano's PodGroup
condition), so the broker's normalisation and the UI can be exercised end to end.
A verdict that ``blocks`` holds back later jobs of the same pools: strict FIFO, no
backfill.  Policy holds never block: Slurm and Kueue both step over jobs that cannot be
admitted by rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping, Sequence

from broker.backends.base import Reason, Rejected
from broker.backends.sim import queues
from broker.backends.sim.model import JobRequest, Partition, SimJob, SimNode, gpu_resource

if TYPE_CHECKING:
    from broker.backends.sim.cluster import SimulatedCluster
from broker.backends.sim.placement import (
    Placement,
    free_if_built,
    free_if_idle,
    matching_pools,
    pack,
    placeable_workers,
)

# vc-scheduler's schedulePeriod (its default): a session enqueues a PodGroup, Volcano's
# controller then creates the pods, and a later session allocates them
VOLCANO_SESSION_S = 1.0
INQUEUE = "PodGroup Inqueue"
QUOTA_INSUFFICIENT = "queue resource quota insufficient: insufficient {res}"  # Volcano's enqueue event
UNSCHEDULABLE = "admitted by Kueue, pods not running yet (WaitForStart: no node of the flavor holds a pod)"
SLURM_NOT_AVAILABLE = "sbatch: error: Batch job submission failed: Requested node configuration is not available"
SLURM_BAD_PARTITION = "sbatch: error: Batch job submission failed: Invalid partition name specified"


@dataclass
class Verdict:
    reason: Reason = Reason.NONE
    raw: str = ""
    placement: Placement | None = None
    pool: str = ""
    pools: list[str] = field(default_factory=list)
    blocks: bool = False


@dataclass
class Context:
    """The cluster as admission sees it during one scheduling pass."""

    nodes: Sequence[SimNode]
    partitions: Mapping[str, Partition]
    quotas: Mapping[str, int]  # Kueue nominal quota per flavor (pool)
    used: Mapping[str, int]  # GPUs of running jobs per pool
    blocked: set[str]  # pools held back by an earlier waiting job
    gang_scheduler: str = ""
    # the nodes of each pool, in node order; the cluster passes the index it keeps (its
    # nodes never change) so that a pass does not filter every node once per pool asked
    by_pool: Mapping[str, Sequence[SimNode]] = field(default_factory=dict)
    # Kueue's ClusterQueues and cohorts, where the cluster has them (sim.queues), and the
    # GPUs running jobs use per (pool, LocalQueue)
    queue_quotas: Sequence[queues.QueueQuota] = ()
    by_queue: Mapping[tuple[str, str], int] = field(default_factory=dict)
    no_borrow: bool = False  # this sweep admits only what fits without borrowing
    # Volcano: each Queue's GPU capability (queues without one are absent), and the GPUs of
    # its jobs that passed the enqueue step but do not run yet
    queue_caps: Mapping[str, int] = field(default_factory=dict)
    inqueue: dict[str, int] = field(default_factory=dict)
    now: float = 0.0  # the pass's instant (simulated seconds)
    enqueued: list[SimJob] = field(default_factory=list)  # Volcano: let in by this pass
    # Slurm: QoS MaxTRESPerJob GPUs per QoS name, association GrpTRES GPUs per account, and
    # the GPUs running jobs use per account
    qos_caps: Mapping[str, int] = field(default_factory=dict)
    account_caps: Mapping[str, int] = field(default_factory=dict)
    by_account: Mapping[str, int] = field(default_factory=dict)
    _sizes: dict[str, int] = field(default_factory=dict, init=False, repr=False)
    _matching: dict[tuple, list[str]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.by_pool:
            self.by_pool = pools_of(self.nodes)

    def pool_nodes(self, pool: str) -> Sequence[SimNode]:
        return self.by_pool.get(pool, ())

    def matching_pools(self, req: JobRequest) -> list[str]:
        """``matching_pools`` over every node: each pool's first node decides, as there.
        Once a pass per kind of request: a long queue asks it for every waiting job."""
        key = (req.partitioning, req.min_gpu_memory_gb, tuple(req.gpu_models), req.gpu_class)
        if key not in self._matching:
            self._matching[key] = matching_pools((members[0] for members in self.by_pool.values()), req)
        return list(self._matching[key])

    def nominal(self, pool: str) -> int:
        if pool in self.quotas:
            return self.quotas[pool]
        # no quota: the flavor's size, summed once a pass (asked again for every waiting job)
        if pool not in self._sizes:
            self._sizes[pool] = sum(n.gpus for n in self.pool_nodes(pool))
        return self._sizes[pool]


def context_of(self: SimulatedCluster, pending: Sequence[SimJob]) -> Context:
    """The context of one pass of the cluster over ``pending`` (bound as the cluster's
    ``_context``): the live figures are the cluster's own, so each start counts at once."""
    live = self._live
    return Context(
        self._nodes,
        self.partitions,
        self.quotas,
        live.used,
        set(),
        self.gang_scheduler,
        self._by_pool,
        queue_quotas=self.queue_quotas,
        by_queue=live.by_queue,
        queue_caps=self.queue_caps,
        inqueue=inqueue_of(pending),
        now=self._cursor,
        qos_caps=self.qos_caps,
        account_caps=self.account_caps,
        by_account=live.by_account,
    )


def pools_of(nodes: Sequence[SimNode]) -> dict[str, list[SimNode]]:
    """The nodes of each pool, pools in the order of their first node."""
    index: dict[str, list[SimNode]] = {}
    for node in nodes:
        index.setdefault(node.pool, []).append(node)
    return index


def _try_pack(ctx: Context, pools: Sequence[str], req: JobRequest) -> Verdict | None:
    for pool in pools:
        placement = pack(ctx.pool_nodes(pool), req)
        if placement is not None:
            return Verdict(placement=placement, pool=pool, pools=list(pools))
    return None


def _fits_somewhere(ctx: Context, pools: Sequence[str], req: JobRequest, free) -> bool:
    return any(pack(ctx.pool_nodes(p), req, free) is not None for p in pools)


def _best_partial(ctx: Context, pools: Sequence[str], req: JobRequest) -> int:
    return max((placeable_workers(ctx.pool_nodes(p), req) for p in pools), default=0)


def _short_nodes(ctx: Context, pools: Sequence[str], req: JobRequest) -> int:
    return sum(1 for p in pools for n in ctx.pool_nodes(p) if n.free < req.gpus_per_worker)


# --- Slurm ---------------------------------------------------------------------------


def slurm_partition(nodes: Sequence[SimNode], partitions: Mapping[str, Partition], req: JobRequest, queue: str) -> str:
    """sbatch's submit-time checks: the partition, and a request no node set could hold."""
    if queue and queue not in partitions:
        raise Rejected("invalid partition", SLURM_BAD_PARTITION)
    names = [queue] if queue else sorted(partitions, key=lambda p: not partitions[p].default)
    for name in names:
        part_nodes = [n for n in nodes if n.partition == name]
        pools = matching_pools(part_nodes, req)
        if any(pack([n for n in part_nodes if n.pool == p], req, free_if_built) is not None for p in pools):
            return name
    raise Rejected("requested node configuration is not available", SLURM_NOT_AVAILABLE)


def slurm(job: SimJob, ctx: Context) -> Verdict:
    req, part = job.request, ctx.partitions[job.partition]
    pools = matching_pools([n for n in ctx.nodes if n.partition == part.name], req)
    if part.max_gpus_per_job is not None and req.total_gpus > part.max_gpus_per_job:
        return Verdict(Reason.POLICY, "QOSMaxGRESPerJob", pools=pools)
    if part.max_time_s is not None and (req.time_limit_s or 0.0) > part.max_time_s:
        # accepted (EnforcePartLimits=NO, Slurm's default) and never started
        return Verdict(Reason.POLICY, "PartitionTimeLimit", pools=pools)
    held = _slurm_limits(job, ctx, pools)
    if held is not None:
        return held
    if ctx.blocked.intersection(pools):
        return Verdict(Reason.CAPACITY, "Priority", pools=pools, blocks=True)
    started = _try_pack(ctx, pools, req)
    if started:
        return started
    if not _fits_somewhere(ctx, pools, req, free_if_idle):
        return Verdict(
            Reason.UNAVAILABLE,
            "ReqNodeNotAvail, UnavailableNodes:"
            + ",".join(n.name for p in pools for n in ctx.pool_nodes(p) if not n.usable),
            pools=pools,
        )
    return Verdict(Reason.CAPACITY, "Resources", pools=pools, blocks=True)


def _slurm_limits(job: SimJob, ctx: Context, pools: list[str]) -> Verdict | None:
    """The job's QoS ``MaxTRESPerJob`` (over it: never runs) and its account's ``GrpTRES``
    (over it with what the account runs: waits until the account's jobs end).  Slurm plans
    nothing for a job a limit holds, so neither holds back the jobs behind it."""
    cap = ctx.qos_caps.get(job.qos)
    if cap is not None and job.gpus > cap:
        return Verdict(Reason.POLICY, "QOSMaxGRESPerJob", pools=pools)
    grp = ctx.account_caps.get(job.account)
    if grp is not None and ctx.by_account.get(job.account, 0) + job.gpus > grp:
        return Verdict(Reason.POLICY, "AssocGrpGRES", pools=pools)
    return None


# --- Kueue ---------------------------------------------------------------------------


def _kueue_quota(
    ctx: Context, pools: Sequence[str], req: JobRequest, res: str, queue: str = ""
) -> tuple[list[str], list[str], bool]:
    """(flavors with room in quota, Kueue's per-flavor details, all-over-maximum?)."""
    need, ok, details, over_max = req.total_gpus, [], [], True
    for pool in pools:
        if ctx.queue_quotas:
            room = queues.headroom(ctx.queue_quotas, pool, queue, ctx.by_queue, nominal_only=ctx.no_borrow)
            if room is None:
                continue  # not a flavor of this job's ClusterQueue
            maximum, left = room
        else:
            maximum = ctx.nominal(pool)
            left = maximum - ctx.used.get(pool, 0)
        if need > maximum:
            details.append(
                f"insufficient quota for {res} in flavor {pool}, previously "
                f"considered podsets requests (0) + current podset request "
                f"({need}) > maximum capacity ({maximum})"
            )
            continue
        over_max = False
        if need > left:
            details.append(f"insufficient unused quota for {res} in flavor {pool}, {need - left} more needed")
        else:
            ok.append(pool)
    return ok, details, over_max


def kueue(job: SimJob, ctx: Context) -> Verdict:
    req = job.request
    res = gpu_resource(req.partitioning)
    pools = ctx.matching_pools(req)
    prefix = "couldn't assign flavors to pod set main: "
    if not pools:
        return Verdict(Reason.POLICY, f"{prefix}resource {res} unavailable in ClusterQueue")
    ok, details, over_max = _kueue_quota(ctx, pools, req, res, job.partition)
    if not ok:
        # over the maximum everywhere: waiting cannot help; else quota frees up later
        reason = Reason.POLICY if over_max else Reason.CAPACITY
        return Verdict(reason, prefix + ", ".join(details), pools=pools, blocks=not over_max)
    if ctx.blocked.intersection(pools):
        return Verdict(
            Reason.CAPACITY, "waiting for earlier workloads in the ClusterQueue (StrictFIFO)", pools=pools, blocks=True
        )
    if ctx.queue_quotas:
        return _kueue_by_quota(ctx, ok[0], req, res, pools)
    started = _try_pack(ctx, ok, req)
    if started:
        return started
    return _kueue_nodes_short(ctx, ok, req, res, pools)


def _kueue_by_quota(ctx: Context, flavor: str, req: JobRequest, res: str, pools: list[str]) -> Verdict:
    """Kueue picks the first flavor with quota (MayStopSearch) without looking at nodes: a
    pod no node of that flavor can ever hold is admitted all the same and never runs (its
    quota held until the Job's deadline; the calibration's evidence, docs/simulator.md),
    shown as an empty placement in that flavor."""
    started = _try_pack(ctx, [flavor], req)
    if started:
        return started
    if not _fits_somewhere(ctx, [flavor], req, free_if_idle):
        return Verdict(Reason.WAITING, UNSCHEDULABLE, placement=[], pool=flavor, pools=pools)
    return _kueue_nodes_short(ctx, [flavor], req, res, pools)


def _kueue_nodes_short(ctx: Context, ok: list[str], req: JobRequest, res: str, pools: list[str]) -> Verdict:
    """Quota admits the job but the pods find no room on the nodes."""
    total = sum(len(ctx.pool_nodes(p)) for p in ok)
    if not _fits_somewhere(ctx, ok, req, free_if_idle):
        return Verdict(
            Reason.UNAVAILABLE,
            f"0/{total} nodes are available: pod set main cannot fit on the schedulable nodes ({res})",
            pools=pools,
        )
    partial = _best_partial(ctx, ok, req)
    if ctx.gang_scheduler == "volcano" and req.workers > 1 and partial > 0:
        return Verdict(Reason.GANG, _gang_text(req, partial, ctx, ok, res), pools=pools, blocks=True)
    short = _short_nodes(ctx, ok, req)
    return Verdict(
        Reason.CAPACITY, f"0/{total} nodes are available: {short} Insufficient {res}.", pools=pools, blocks=True
    )


# --- Volcano -------------------------------------------------------------------------


def _gang_text(req: JobRequest, partial: int, ctx: Context, pools: Sequence[str], res: str) -> str:
    total = sum(len(ctx.pool_nodes(p)) for p in pools)
    short = _short_nodes(ctx, pools, req)
    return (
        f"NotEnoughResources: {req.workers - partial}/{req.workers} tasks in gang "
        f"unschedulable: pod group is not ready, {req.workers} Pending, {req.workers} "
        f"minAvailable; {short}/{total} nodes are unavailable: {short} Insufficient {res}."
    )


def volcano(job: SimJob, ctx: Context) -> Verdict:
    req = job.request
    res = gpu_resource(req.partitioning)
    pools = ctx.matching_pools(req)
    if not pools or not _fits_somewhere(ctx, pools, req, free_if_idle):
        return Verdict(
            Reason.UNAVAILABLE,
            f"NotEnoughResources: {req.workers}/{req.workers} "
            f"tasks in gang unschedulable: no schedulable node offers {res} "
            f"for this gang",
            pools=pools,
        )
    capped = _enqueue(job, ctx, res, pools)
    if capped is not None:
        return capped
    if ctx.now < job.ready_at:  # its pods are being created
        return Verdict(Reason.NONE, INQUEUE, pools=pools)
    if ctx.blocked.intersection(pools):
        return Verdict(
            Reason.CAPACITY,
            f"{req.workers}/{req.workers} tasks in gang unschedulable: waiting behind earlier jobs in the queue",
            pools=pools,
            blocks=True,
        )
    started = _try_pack(ctx, pools, req)
    if started:
        ctx.inqueue[job.partition] = ctx.inqueue.get(job.partition, 0) - job.gpus  # running now
        return started
    partial = _best_partial(ctx, pools, req)
    # all-or-nothing: part of the gang fits, yet nothing starts until every member does
    reason = Reason.GANG if req.workers > 1 and partial > 0 else Reason.CAPACITY
    return Verdict(reason, _gang_text(req, partial, ctx, pools, res), pools=pools, blocks=True)


def inqueue_of(pending: Sequence[SimJob]) -> dict[str, int]:
    """Volcano: GPUs per Queue of the jobs through the enqueue step, not yet running."""
    out: dict[str, int] = {}
    for job in pending:
        if job.enqueued:
            out[job.partition] = out.get(job.partition, 0) + job.gpus
    return out


def _enqueue(job: SimJob, ctx: Context, res: str, pools: list[str]) -> Verdict | None:
    """Volcano's enqueue step (the proportion plugin): a gang whose GPUs, with what its Queue
    has allocated and what its other enqueued gangs will take, pass the Queue's capability
    stays Pending (an event says so; no condition); never passing it alone is a rule, not a
    wait.  It holds back nothing else.  Once through, its PodGroup is Inqueue and its GPUs
    count against the capability while it waits for nodes: a smaller gang that passed first
    keeps a bigger one out (the calibration's evidence, docs/simulator.md).  A Queue
    without a capability enqueues every gang."""
    if job.enqueued:
        return None
    cap = ctx.queue_caps.get(job.partition)
    if cap is not None:
        if job.gpus > cap:
            return Verdict(Reason.POLICY, QUOTA_INSUFFICIENT.format(res=res), pools=pools)
        running = sum(gpus for (_, queue), gpus in ctx.by_queue.items() if queue == job.partition)
        if running + ctx.inqueue.get(job.partition, 0) + job.gpus > cap:
            return Verdict(Reason.CAPACITY, QUOTA_INSUFFICIENT.format(res=res), pools=pools)
    job.enqueued, job.ready_at = True, ctx.now + VOLCANO_SESSION_S
    ctx.inqueue[job.partition] = ctx.inqueue.get(job.partition, 0) + job.gpus
    ctx.enqueued.append(job)
    return None


ADMIT = {"slurm": slurm, "kueue": kueue, "volcano": volcano}
