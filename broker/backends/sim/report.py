"""What a simulated cluster reports: its jobs as the broker sees them, usage records,
pools and queue figures.  Functions of the cluster (bound as its methods), kept apart from
the scheduling in cluster.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.backends.base import (
    DestinationJob,
    JobState,
    NodeInventory,
    PoolInventory,
    QueueStats,
    Reason,
    UsageRecord,
)
from broker.backends.sim.model import SIM_LEVEL, SimJob, SimNode
from broker.backends.sim.outcome import outcome

if TYPE_CHECKING:
    from broker.backends.sim.cluster import SimulatedCluster


def view(self: SimulatedCluster, job: SimJob) -> DestinationJob:
    if job.doomed and job.state is JobState.RUNNING:
        job.seen_running = True  # the broker saw it run; from now on it is gone
    raw = job.raw_reason if job.state is JobState.PENDING else job.end_raw
    return DestinationJob(
        job_id=job.job_id,
        workload_id=job.workload_id,
        state=job.state,
        reason=job.reason if job.state is JobState.PENDING else Reason.NONE,
        raw_reason=raw,
        gpus=job.gpus,
        nodes=job.nodes,
        started_at=None if job.started_at is None else self.clock.at(job.started_at),
        ended_at=None if job.ended_at is None else self.clock.at(job.ended_at),
        run_s=self._run_time(job),
        outcome=outcome(job, self.flavor),
    )


def run_time(self: SimulatedCluster, job: SimJob) -> float | None:
    """Elapsed simulated time of a started job (so far, while it runs)."""
    if job.started_at is None:
        return None
    end = job.ended_at if job.ended_at is not None else self._cursor
    return self.clock.run_time(max(0.0, end - job.started_at))


def usage_record(self: SimulatedCluster, job: SimJob) -> UsageRecord:
    assert job.started_at is not None
    return UsageRecord(
        source="simulator",
        cluster=self.name,
        job_id=job.job_id,
        workload_id=job.workload_id,
        account=job.account,
        gpu_model=job.gpu_model,
        gpus=job.gpus,
        start=self.clock.at(job.started_at),
        end=None if job.ended_at is None else self.clock.at(job.ended_at),
        # every run of it: an evicted job's earlier runs used its GPUs too (charged once each);
        # a job of GPU shares pays its share of each GPU, not the whole one
        gpu_seconds=int(
            round(
                job.gpus
                * ((self._run_time(job) or 0.0) + self.clock.run_time(job.ran_before_s))
                / max(1, job.units_per_gpu)
            )
        ),
        state=job.state.value,
    )


def pools(self: SimulatedCluster) -> tuple[PoolInventory, ...]:
    groups: dict[str, list[SimNode]] = {}
    for node in self._nodes:
        groups.setdefault(node.pool, []).append(node)
    pools = [_pool(name, nodes, self.owner) for name, nodes in groups.items()]
    for node in self._nodes:
        # a double claim shows as the same node in a second scheduler's pool
        pools += [_pool(f"{node.pool}@{other}", [node], other) for other in node.extra_owners]
    return tuple(pools)


def _pool(name: str, nodes: list[SimNode], owner: str) -> PoolInventory:
    first = nodes[0]
    return PoolInventory(
        name=name,
        gpu_model=first.gpu_model,
        gpu_memory_gb=first.gpu_memory_gb,
        partitioning=first.partitioning,
        owner=owner,
        nodes=tuple(
            NodeInventory(
                name=n.name,
                gpu_model=n.gpu_model,
                gpu_memory_gb=n.gpu_memory_gb,
                gpus_total=n.gpus,
                gpus_allocatable=n.gpus,
                gpus_allocated=n.allocated,
                partitioning=n.partitioning,
                units_per_gpu=n.units_per_gpu,
                healthy=n.healthy,
                draining=n.draining,
                health_reason=_health_reason(n.healthy, n.draining),
                interconnect_domain=n.interconnect_domain,
                # the simulator's one level: the interconnect domain its node group names
                topology=((SIM_LEVEL, n.interconnect_domain),) if n.interconnect_domain else (),
                owner=owner,
                provisioning="" if n.up else ("requested" if n.ready_at is not None else "available"),
            )
            for n in nodes
        ),
    )


def queue_stats(self: SimulatedCluster) -> QueueStats:
    pending = [j for j in self._live.jobs.values() if j.state is JobState.PENDING]
    # throughput over the last (scaled) hour, or since the cluster was created
    window = min(3600.0 / self.clock.time_scale, self._cursor - self._created)
    busy = 0.0
    if window > 0:
        start = self._cursor - window
        for job in self._jobs.values():
            if job.started_at is None or job.lost:
                continue
            end = job.ended_at if job.ended_at is not None else self._cursor
            busy += job.gpus * max(0.0, min(end, self._cursor) - max(job.started_at, start))
    by_account: dict[str, int] = {}
    if self.flavor == "slurm":  # as Slurm reports them (read where fair share orders the queue)
        for job in pending:
            by_account[job.account] = by_account.get(job.account, 0) + job.gpus
    return QueueStats(
        pending_jobs=len(pending),
        pending_gpus=sum(j.gpus for j in pending),
        gpu_hours_per_hour=busy / window if window > 0 else 0.0,
        pending_gpus_by_scope=tuple(sorted((a, g) for a, g in by_account.items() if a)),
    )


def _health_reason(healthy: bool, draining: bool) -> str:
    return "set by the simulator's node lever" if not healthy or draining else ""
