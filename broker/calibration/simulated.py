"""The simulator's side of a calibration: built from the real cluster's inventory and local
limits as its backend reads them (never written by hand), then played on a manual clock at
the job list's instants, sampled at the instants the real side was."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from broker.backends.base import JobState, ProjectIdentity
from broker.backends.sim import queues as sim_queues
from broker.backends.sim.clock import SimClock
from broker.backends.sim.cluster import SimulatedCluster
from broker.backends.sim.model import Partition, SimNode
from broker.calibration.jobs import CalibrationJob, JobList
from broker.calibration.played import Observed, Played
from broker.cluster_report import InventorySnapshot, NodeInventory, PoolInventory
from broker.local_limits import LocalLimits
from portal.tenancy.errors import DomainError

ORIGIN = datetime(2026, 1, 1, tzinfo=UTC)
# Slurm keeps an ended job's nodes while it completes (epilog, slurmd's report) and starts
# the next job on the scheduler's next look: a second from an end to the start it allows
# (the median over 250 such starts of the committed runs on 22.05 and 24.11; at most 2 s)
SLURM_COMPLETING_S = 1.0
# Kueue: the time from a pod's end to the start its freed quota allows (the Job completes,
# the Workload finishes, the next is admitted, its pods run): the mean over the 148 such
# starts of the committed runs of both Kueue lists (1.28 s on the first list's, 1.73 s on the
# steady list's; the API's whole-second timestamps make a median read 1 or 2 s).  Volcano's
# is in its session (sim VOLCANO_SESSION_S): adding a second there moved its median error
# from 2.4 to 3.9 s on its runs, so it has none
KUEUE_COMPLETING_S = 1.5
_STATES = {JobState.COMPLETED: "completed", JobState.FAILED: "timeout", JobState.CANCELLED: "cancelled"}


class NotCalibratable(DomainError, ValueError):
    """The cluster cannot be calibrated as it stands (the message says why)."""


def inventory_json(snapshot: InventorySnapshot) -> dict[str, Any]:
    """The snapshot as a calibration keeps it, so the simulator side can be played again
    later (by another version of the simulator) against the same real run."""
    return {
        "cluster": snapshot.cluster,
        "pools": [
            {
                "name": p.name,
                "gpu_model": p.gpu_model,
                "gpu_memory_gb": p.gpu_memory_gb,
                "partitioning": p.partitioning,
                "owner": p.owner,
                "nodes": [n.to_json() for n in p.nodes],
            }
            for p in snapshot.pools
        ],
        "limits": snapshot.limits.to_json(),
    }


def inventory_from_json(data: dict[str, Any]) -> InventorySnapshot:
    pools = tuple(
        PoolInventory(
            name=p["name"],
            gpu_model=p["gpu_model"],
            gpu_memory_gb=p["gpu_memory_gb"],
            partitioning=p["partitioning"],
            owner=p["owner"],
            nodes=tuple(
                NodeInventory.from_json(
                    n,
                    gpu_model=p["gpu_model"],
                    gpu_memory_gb=p["gpu_memory_gb"],
                    partitioning=p["partitioning"],
                    owner=p["owner"],
                )
                for n in p["nodes"]
            ),
        )
        for p in data["pools"]
    )
    return InventorySnapshot(
        cluster=data["cluster"], taken_at=ORIGIN, pools=pools, limits=LocalLimits.from_json(data["limits"])
    )


def simulator_for(snapshot: InventorySnapshot, partition: str) -> SimulatedCluster:
    """The simulated Slurm cluster of one partition: its nodes as the inventory lists them,
    the per-job GPU cap and the MaxTime its local limits report for that partition's pools,
    the accounts' fair share."""
    pools = [p for p in snapshot.pools if p.name.split("/", 1)[0] == partition]
    if not pools:
        have = sorted({p.name.split("/", 1)[0] for p in snapshot.pools})
        raise NotCalibratable(f"partition {partition!r}: not in {snapshot.cluster}'s inventory ({', '.join(have)})")
    nodes = [n for p in pools for n in p.nodes]
    busy = [f"{n.name} ({n.gpus_allocated} of {n.gpus_total} GPUs)" for n in nodes if n.gpus_allocated]
    if busy:
        raise NotCalibratable(f"partition {partition!r} is not idle: {', '.join(busy)} allocated")
    caps = [c for p in pools for c in snapshot.limits.caps_for(p.name)]
    gpus = [c.max_gpus for c in caps if c.max_gpus is not None]
    times = [c.max_time_s for c in caps if c.max_time_s is not None and c.pool]  # the partition's own
    sim_nodes = [_sim_node(n, partition) for n in nodes]
    part = Partition(
        partition, max_gpus_per_job=min(gpus, default=None), default=True, max_time_s=min(times, default=None)
    )
    return SimulatedCluster(
        snapshot.cluster,
        "slurm",
        sim_nodes,
        partitions=[part],
        clock=SimClock(ORIGIN),
        queueing="backfill",
        slurm_limits=_slurm_limits(snapshot.limits),
        share_points=snapshot.limits.share_points(),
        completing_s=SLURM_COMPLETING_S,
    )


def _slurm_limits(limits: LocalLimits) -> tuple[dict[str, int], dict[str, int]]:
    """Each named QoS's MaxTRESPerJob and each account's GrpTRES in GPUs, as the Slurm
    backend reports them (scopes ``qos:NAME`` and the account's name)."""
    qos = {c.scope.removeprefix("qos:"): c.max_gpus for c in limits.caps if c.scope.startswith("qos:")}
    accounts = {q.scope: q.limit_gpus for q in limits.quotas if q.scope and not q.scope.startswith("qos:")}
    return (
        {name: gpus for name, gpus in qos.items() if gpus is not None},
        {name: gpus for name, gpus in accounts.items() if gpus is not None},
    )


def simulator_for_kueue(snapshot: InventorySnapshot, queues: Sequence[str]) -> SimulatedCluster:
    """The simulated Kueue of the ClusterQueues that ``queues`` (LocalQueue names) feed: the
    nodes of the flavors their quotas name, those quotas (own, borrowed, the cohort's) and
    each queue's preemption policy, as the backend reports them; BestEffortFIFO."""
    wanted = [q for q in snapshot.limits.quotas if q.scope in queues]
    missing = sorted(set(queues) - {q.scope for q in wanted})
    if missing:
        raise NotCalibratable(f"queue(s) {', '.join(missing)}: no GPU quota of {snapshot.cluster} is fed by them")
    flavors = {q.pool for q in wanted}
    # a MIG flavor's pool is named "<flavor>/<profile>" (broker/backends/kube/inventory.py)
    pools = [p for p in snapshot.pools if _flavor(p.name) in flavors]
    nodes = [n for p in pools for n in p.nodes]
    busy = [f"{n.name} ({n.gpus_allocated} of {n.gpus_total} GPUs)" for n in nodes if n.gpus_allocated]
    if busy:
        raise NotCalibratable(f"flavors {', '.join(sorted(flavors))} are not idle: {', '.join(busy)} allocated")
    return SimulatedCluster(
        snapshot.cluster,
        "kueue",
        [_sim_node(n, "", flavor=_flavor(p.name)) for p in pools for n in p.nodes],
        clock=SimClock(ORIGIN),
        queueing="backfill",
        queue_quotas=sim_queues.queue_quotas(wanted),
        completing_s=KUEUE_COMPLETING_S,
    )


def _flavor(pool: str) -> str:
    return pool.split("/", 1)[0]


def simulator_for_volcano(snapshot: InventorySnapshot, queues: Sequence[str], pool: str) -> SimulatedCluster:
    """The simulated Volcano of one GPU pool (the list's jobs ask for its model, so no
    other node can take them): its nodes as the inventory lists them, and the GPU
    capability of each of ``queues`` (Volcano Queues) that has one, as the backend reads
    it ("" is the backend's default queue); every job tried in turn in each pass, a gang
    that does not fit holding back nothing (Volcano's allocate: no reservation)."""
    found = [p for p in snapshot.pools if p.name == pool]
    if not found:
        have = ", ".join(sorted(p.name for p in snapshot.pools))
        raise NotCalibratable(f"pool {pool!r}: not in {snapshot.cluster}'s inventory ({have})")
    nodes = list(found[0].nodes)
    busy = [f"{n.name} ({n.gpus_allocated} of {n.gpus_total} GPUs)" for n in nodes if n.gpus_allocated]
    if busy:
        raise NotCalibratable(f"pool {pool!r} is not idle: {', '.join(busy)} allocated")
    caps = {q.scope: q.limit_gpus for q in snapshot.limits.quotas if q.scope in queues and q.limit_gpus is not None}
    return SimulatedCluster(
        snapshot.cluster,
        "volcano",
        [_sim_node(n, "") for n in nodes],
        clock=SimClock(ORIGIN),
        queueing="backfill",
        queue_caps=caps,
    )


def _sim_node(n: NodeInventory, partition: str, flavor: str = "") -> SimNode:
    return SimNode(
        name=n.name,
        gpu_model=n.gpu_model,
        gpu_memory_gb=n.gpu_memory_gb,
        gpus=n.gpus_allocatable,
        partitioning=n.partitioning,
        interconnect_domain=n.interconnect_domain,
        partition=partition,
        healthy=n.healthy,
        draining=n.draining,
        flavor=flavor,
    )


def play(
    sim: SimulatedCluster,
    jobs: JobList,
    samples: Iterable[float],
    *,
    account: str = "calibration",
    queue: str | None = None,
    local_queue: str | None = None,
) -> Played:
    """Submit, cancel and sample at the list's instants; run to the end.  ``queue``: where
    the broker's jobs go (default: the Slurm partition); ``local_queue``: the local jobs."""
    partition = queue if queue is not None else next(iter(sim.partitions))
    local = local_queue if local_queue is not None else partition
    identity = ProjectIdentity(tenant="calibration", project="calibration", slurm_account=account, queue=partition)
    events: list[tuple[float, int, str, object]] = [(j.at_s, 1, "submit", j) for j in jobs.jobs]
    events += [(j.cancel_at_s, 0, "cancel", j) for j in jobs.jobs if j.cancel_at_s is not None]
    events += [(t, 2, "sample", t) for t in samples]
    ids: dict[str, str] = {}
    played = Played(side="simulator")
    for at, _, what, item in sorted(events, key=lambda e: (e[0], e[1])):
        sim.clock.advance_to(at)
        if what == "submit":
            assert isinstance(item, CalibrationJob)
            own = replace(identity, slurm_account=item.account) if item.account else identity
            ids[item.name] = _submit(sim, item, own, local if item.local else partition)
        elif what == "cancel":
            assert isinstance(item, CalibrationJob)
            sim.cancel(ids[item.name])
        else:
            sim.tick()
            played.reasons[at] = {
                name: sim.job(jid).reason.value for name, jid in ids.items() if sim.job(jid).state is JobState.PENDING
            }
    sim.clock.advance_to(jobs.span_s + 3600.0)
    sim.tick()
    for job in jobs.jobs:
        played.jobs[job.name] = _observed(sim, job, ids[job.name])
    return played


def _submit(sim: SimulatedCluster, job: CalibrationJob, identity: ProjectIdentity, partition: str) -> str:
    if job.local:
        return sim.inject_foreign_job(
            name=job.name,
            gpus_per_worker=job.gpus_per_worker,
            workers=job.workers,
            partitioning=job.mig_profile or "whole",
            account=identity.slurm_account,
            duration_s=job.run_s,
            partition=partition,
            time_limit_s=job.time_limit_min * 60.0,
            priority=job.priority,
            qos=job.qos,
        )
    # Slurm: the partition's model, as sbatch's typed gres asks; Kueue: any of the flavors';
    # Volcano: the pool's
    spec = job.spec("calibration", gpu_models=[sim.nodes[0].gpu_model] if sim.flavor == "slurm" else models(sim))
    sim.runtimes.set(job.name, job.run_s)
    return sim.submit(spec, job.name, identity)


def models(sim: SimulatedCluster) -> list[str]:
    """Every GPU model of the simulated cluster: a job list's job may run on any."""
    return sorted({n.gpu_model for n in sim.nodes})


def _observed(sim: SimulatedCluster, job: CalibrationJob, job_id: str) -> Observed:
    sj = sim.job(job_id)
    return Observed(
        name=job.name,
        submitted_s=sj.submitted_at,
        started_s=sj.first_started_at,
        ended_s=sj.ended_at,
        state=_STATES.get(sj.state, sj.state.value),
        preempted=sj.preempted,
        nodes=",".join(sorted(sj.nodes)),
    )
