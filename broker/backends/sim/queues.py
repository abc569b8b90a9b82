"""Kueue's ClusterQueues as a simulated cluster applies them: quotas per LocalQueue, a
cohort's shared quota that members borrow from, and preemption within a ClusterQueue.

Built from the quotas a Kueue backend reports (``GroupQuota``, scope = the LocalQueue whose
jobs count against it; ``kube.limits``): a ClusterQueue's own quota per flavor (its nominal
quota plus what it may borrow) and, for a cohort of two or more queues, the cohort's total.
A job is admitted to a flavor when it fits every quota that covers its queue there; a
flavor no quota of its queue names is not its queue's to use.  Without queue quotas a
simulated Kueue keeps its single per-flavor quota (``SimulatedCluster.quotas``).

Order: Kueue's scheduling cycles, run at each instant until every waiting job has been
looked at.  A cycle takes one head per ClusterQueue (its first waiting job by priority,
then submission, not yet looked at in this pass), the heads that fit without borrowing
first, then by priority and submission; each is admitted, preempts, or is set aside until
the next pass (BestEffortFIFO: the ClusterQueue's next job becomes its head; StrictFIFO:
the ClusterQueue waits).  So within a ClusterQueue a higher-priority job is always looked at
before a lower one that would fit without borrowing (found by the calibration,
docs/simulator.md, Kueue fixes 2 and 8).

Preemption (``withinClusterQueue: LowerPriority``): a waiting job that its quotas hold back
evicts running jobs of lower priority in its own ClusterQueue, lowest priority first and
then the most recently started, as few as free what it needs; it may borrow to fit, since
every candidate is of its own queue (what Kueue does when it has no other queue's jobs to
reclaim: the calibration showed a low-priority job preempted again and again by normal
ones while the queue borrowed).  Evicted jobs queue again and run from the start.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.backends.base import JobState, Reason
from broker.backends.sim.model import PRIORITY_RANK, SimJob
from broker.local_limits import GroupQuota

if TYPE_CHECKING:
    from broker.backends.sim.admission import Context, Verdict
    from broker.backends.sim.cluster import SimulatedCluster

PREEMPTED = "Preempted to accommodate a higher priority Workload (withinClusterQueue: LowerPriority)"


@dataclass(frozen=True)
class QueueQuota:
    source: str  # "ClusterQueue calib-cq flavor a100", "cohort calib flavor a100"
    pool: str
    queues: frozenset[str]  # LocalQueue names ("" for the broker's default queue)
    limit: int  # GPUs: nominal plus what may be borrowed
    nominal: int
    preemption: str = ""  # the ClusterQueue's withinClusterQueue policy; "" for none


def queue_quotas(quotas: Iterable[GroupQuota]) -> tuple[QueueQuota, ...]:
    """One quota per (source, flavor) over every scope the backend reported it for; a
    quota without a GPU ceiling limits nothing and is left out."""
    scopes: dict[tuple[str, str], set[str]] = {}
    first: dict[tuple[str, str], GroupQuota] = {}
    for q in quotas:
        if q.limit_gpus is None:
            continue
        key = (q.source, q.pool)
        scopes.setdefault(key, set()).add(q.scope)
        first.setdefault(key, q)
    return tuple(
        QueueQuota(
            source=q.source,
            pool=q.pool,
            queues=frozenset(scopes[key]),
            limit=int(q.limit_gpus or 0),
            nominal=int(q.nominal_gpus or 0),
            preemption=q.preemption,
        )
        for key, q in first.items()
    )


def covering(quotas: Sequence[QueueQuota], pool: str, queue: str) -> list[QueueQuota]:
    return [q for q in quotas if q.pool == pool and queue in q.queues]


def used(quota: QueueQuota, by_queue: Mapping[tuple[str, str], int]) -> int:
    return sum(by_queue.get((quota.pool, name), 0) for name in quota.queues)


def headroom(
    quotas: Sequence[QueueQuota],
    pool: str,
    queue: str,
    by_queue: Mapping[tuple[str, str], int],
    *,
    nominal_only: bool = False,
) -> tuple[int, int] | None:
    """(the most the queue may ever hold in the flavor, what it may still be admitted there;
    ``nominal_only``: without borrowing); None: no quota of its queue there."""
    mine = covering(quotas, pool, queue)
    if not mine:
        return None
    left = min((q.nominal if nominal_only else q.limit) - used(q, by_queue) for q in mine)
    return min(q.limit for q in mine), left


def victims(
    job: SimJob,
    pools: Sequence[str],
    quotas: Sequence[QueueQuota],
    running: Iterable[SimJob],
    pool_of: Mapping[str, str],
    by_queue: Mapping[tuple[str, str], int],
) -> list[SimJob]:
    """The running jobs whose eviction lets ``job`` in, in the first flavor where that
    works; none when no flavor does (or its queue does not preempt)."""
    rank = PRIORITY_RANK.get(job.request.priority, 1)
    for pool in pools:
        mine = covering(quotas, pool, job.partition)
        own = [q for q in mine if q.preemption]
        if not own:
            continue
        lower = [
            j
            for j in running
            if pool_of.get(j.job_id) == pool
            and j.partition in own[0].queues
            and PRIORITY_RANK.get(j.request.priority, 1) > rank
        ]
        lower.sort(key=lambda j: (-PRIORITY_RANK.get(j.request.priority, 1), -(j.started_at or 0.0), -j.seq))
        chosen = _enough(job, mine, lower, by_queue)
        if chosen:
            return chosen
    return []


def _enough(
    job: SimJob, mine: Sequence[QueueQuota], lower: Sequence[SimJob], by_queue: Mapping[tuple[str, str], int]
) -> list[SimJob]:
    """Candidates in order until the job fits every quota of its queue (borrowing allowed:
    every candidate is of its own ClusterQueue), then those not needed after all given
    back, the last taken first (Kueue's minimal preemption)."""

    def fits(freed: int) -> bool:
        return all(used(q, by_queue) - freed + job.gpus <= q.limit for q in mine)

    chosen: list[SimJob] = []
    for candidate in lower:
        chosen.append(candidate)
        if fits(sum(c.gpus for c in chosen)):
            for spare in reversed(chosen[:-1]):
                if fits(sum(c.gpus for c in chosen) - spare.gpus):
                    chosen.remove(spare)
            return chosen
    return []


def preempt_for(self: SimulatedCluster, job: SimJob, verdict: Verdict) -> bool:
    """Kueue's preemption within a ClusterQueue: evict, True if any (bound as the cluster's
    ``_preempt_for``)."""
    if not self.queue_quotas:
        return False
    running = self._live.running()
    evicted = victims(job, verdict.pools, self.queue_quotas, running, self._live.pool_of(), self._live.by_queue)
    for victim in evicted:
        self._release(victim)
        if victim.started_at is not None:
            victim.ran_before_s += self._cursor - victim.started_at
        victim.state, victim.started_at, victim.placement = JobState.PENDING, None, []
        victim.reason, victim.raw_reason, victim.preempted = Reason.CAPACITY, PREEMPTED, victim.preempted + 1
        self._live.add(victim)
    return bool(evicted)


def preempt(self: SimulatedCluster, job_id: str) -> None:
    """A local job of a preempting QoS takes this running job's GPUs and ends it, as Slurm's
    QoS preemption with PreemptMode=CANCEL does; not modelled by itself here, so the tests
    call it (bound as the cluster's ``preempt``)."""
    with self._lock:
        self._catch_up()
        job = self._jobs[job_id]
        if job.state is not JobState.RUNNING:
            raise ValueError(f"job {job_id} is {job.state.value}, not running: nothing to preempt")
        self._end_now(job, JobState.PREEMPTED, "PREEMPTED")


def cluster_queue(quotas: Sequence[QueueQuota], queue: str) -> str:
    """The ClusterQueue a LocalQueue feeds, as its quotas name it (the queue itself if none)."""
    for q in quotas:
        if queue in q.queues and q.source.startswith("ClusterQueue "):
            return q.source.split()[1]
    return queue


def cycles(
    self: SimulatedCluster, pending: Sequence[SimJob], ctx: Context, admit: Callable[[SimJob, Context], Verdict]
) -> None:
    """Kueue's scheduling cycles at this instant (the module's "Order"); bound as the
    cluster's ``_kueue_cycles``.  ``pending`` is in queue order, so each ClusterQueue's
    waiting jobs are taken from the front of its own list, each looked at once."""
    queues: dict[str, deque[SimJob]] = {}
    for job in pending:
        queues.setdefault(cluster_queue(self.queue_quotas, job.partition), deque()).append(job)
    while queues:
        heads = {cq: waiting.popleft() for cq, waiting in queues.items()}
        ctx.no_borrow = True
        borrows = {j.job_id: admit(j, ctx).placement is None for j in heads.values()}
        ctx.no_borrow = False
        order = sorted(
            heads.items(), key=lambda h: (borrows[h[1].job_id], PRIORITY_RANK.get(h[1].request.priority, 1), h[1].seq)
        )
        for cq, job in order:
            verdict = admit(job, ctx)
            if verdict.placement is None and verdict.reason is Reason.CAPACITY and self._preempt_for(job, verdict):
                verdict = admit(job, ctx)
            if verdict.placement is not None:
                self._start(job, verdict)
                continue
            job.reason, job.raw_reason = verdict.reason, verdict.raw
            if self.queueing == "strict" and verdict.blocks:
                queues[cq].clear()  # StrictFIFO: the ClusterQueue waits behind its head
        queues = {cq: waiting for cq, waiting in queues.items() if waiting}
