"""Test and demo levers of a simulated cluster: what a test or the demo does to it from
outside (a worker killed for memory, a node claimed twice, drained or sick, a quota
changed), and what the replay reads of it (the elastic pools' bill).  Functions of the
cluster (bound as its methods), kept apart from the scheduling in cluster.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.backends.base import JobState
from broker.backends.sim import elastic
from broker.backends.sim.model import JobRequest
from broker.backends.sim.outcome import OOM_EXIT_CODE, OOM_RAW

if TYPE_CHECKING:
    from broker.backends.sim.cluster import SimulatedCluster


def kill_for_memory(self: SimulatedCluster, job_id: str, worker: int) -> None:
    """The kernel's OOM killer ends one worker of a running job, and so the job."""
    with self._lock:
        self._catch_up()
        job = self._jobs[job_id]
        if job.state is not JobState.RUNNING or not 0 <= worker < job.request.workers:
            raise ValueError(f"job {job_id} is not running or has no worker {worker}")
        self._release(job)
        job.state, job.ended_at = JobState.FAILED, self._cursor
        job.end_raw, job.end_worker, job.exit_code = OOM_RAW[self.flavor], str(worker), OOM_EXIT_CODE
        self._schedule()


def claim_node_by(self: SimulatedCluster, other_scheduler: str, node_name: str | None = None) -> str:
    """Make a second scheduler report a node too (a double claim); returns the node.

    Without ``node_name`` the first node is claimed."""
    with self._lock:
        node = self.node(node_name) if node_name else self._nodes[0]
        if other_scheduler != self.owner and other_scheduler not in node.extra_owners:
            node.extra_owners.append(other_scheduler)
        return node.name


def set_node(
    self: SimulatedCluster, node_name: str, *, healthy: bool | None = None, draining: bool | None = None
) -> None:
    with self._lock:
        self._catch_up()
        node = self.node(node_name)
        node.healthy = node.healthy if healthy is None else healthy
        node.draining = node.draining if draining is None else draining
        self._schedule()


def break_gpus(self: SimulatedCluster, node_name: str, broken: bool = True) -> None:
    """The node's GPUs fail a pre-flight check from now on (or work again), while the
    scheduler still counts them healthy: only a job that checks finds out."""
    with self._lock:
        self._catch_up()
        self.node(node_name).gpus_broken = broken


def set_quota(self: SimulatedCluster, flavor: str, gpus: int) -> None:
    """Kueue nominal quota of a flavor (pool name such as ``a100-80gb``)."""
    with self._lock:
        self._catch_up()
        self.quotas[flavor] = gpus
        self._schedule()


def inject_foreign_job(
    self: SimulatedCluster,
    name: str = "foreign-job",
    gpus_per_worker: int = 1,
    workers: int = 1,
    gpu_model: str = "",
    partitioning: str = "whole",
    account: str = "unknown",
    duration_s: float | None = None,
    partition: str = "",
    time_limit_s: float | None = None,
    priority: str = "normal",
    qos: str = "",
    workload_id: str | None = None,
) -> str:
    """A job nobody asked the broker for, with its user's time limit (on Slurm its QoS);
    ``workload_id``: one carrying the broker's marker that its database does not know."""
    req = JobRequest(
        name=name,
        priority=priority,
        gpus_per_worker=gpus_per_worker,
        workers=workers,
        partitioning=partitioning,
        gpu_models=(gpu_model,) if gpu_model else (),
        time_limit_s=time_limit_s,
        one_per_node=self.flavor == "slurm",
    )
    with self._lock:
        self._catch_up()
        part = self._partition_for(req, partition)
        job = self._new_job(req, workload_id, account, part, account, duration_s=duration_s)
        job.qos = qos
        self._schedule()
        return job.job_id


def billed_node_seconds(self: SimulatedCluster) -> dict[str, float]:
    """Per elastic pool, the node-seconds billed so far (request to release, idle included)."""
    with self._lock:
        self._catch_up()
        billed = elastic.billed_node_seconds(self._elastic, self._cursor)
        return {pool: self.clock.run_time(s) for pool, s in billed.items()}  # in the jobs' time


def idle_billed_gpu_seconds(self: SimulatedCluster) -> float:
    """GPU-seconds billed on elastic nodes beyond the jobs' own (provisioning, idle tail)."""
    with self._lock:
        self._catch_up()
        return self.clock.run_time(elastic.idle_billed_gpu_seconds(self._elastic, self._jobs.values(), self._cursor))
