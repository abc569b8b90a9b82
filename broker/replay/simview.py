"""The replay's view of the simulated fleet: ground truth the harness and baselines read.

The broker's presets see the fleet only through their own services (inventory sync,
status polls).  The harness needs the truth beside that, to score every strategy the
same way, and the baselines work on it directly: which clusters could ever run a job,
how many GPUs are free for it (summed over nodes, which is what naive schedulers look
at), and why a job sent somewhere did not start there at once.
"""

from __future__ import annotations

from dataclasses import replace

from typing import Sequence

from broker.backends.base import Reason, Rejected
from broker.backends.sim import SimulatedCluster, SimulatorFleet
from broker.backends.sim import admission
from broker.backends.sim.cluster import request_from_spec
from broker.backends.sim.model import JobRequest, SimNode
from broker.backends.sim.placement import free_if_idle, matching_pools, pack
from broker.fleet_file import ClusterDescription, FleetDescription
from broker.replay.jobs import ReplayJob
from broker.spec import WorkloadSpec, validate_spec

# Why a job sent to a cluster did not start there at once (first matching rule).
LOCAL_POLICY = "local policy"  # the cluster's own rules hold it (Slurm QoS, Kueue max)
LOCAL_QUOTA = "local quota"  # Kueue quota of the flavors is used up
CAPACITY = "capacity"  # fewer free GPUs than the job needs, even summed
FRAGMENTATION = "fragmentation"  # enough free GPUs summed, but the gang cannot be packed
QUEUE = "queue"  # it would pack, but earlier jobs wait ahead (strict FIFO)

REPLAY_PROJECT = "replay"


def spec_for(job: ReplayJob, project: str = REPLAY_PROJECT) -> WorkloadSpec:
    return validate_spec({**job.spec_data(), "project": project})


class FleetView:
    """Simulated clusters plus their descriptions, with cached per-shape answers.

    ``touch(cluster)`` must be called whenever a cluster's jobs change (submit, start,
    end, cancel): free-GPU answers are cached per cluster until then."""

    def __init__(self, sim: SimulatorFleet, fleet: FleetDescription):
        self.sim = sim
        self.fleet = fleet
        self.names: list[str] = list(fleet.names)
        self.clusters: dict[str, SimulatedCluster] = {n: sim.get(n) for n in self.names}
        self._requests: dict[str, JobRequest] = {}
        self._eligible: dict[tuple, list[str]] = {}
        self._version: dict[str, int] = dict.fromkeys(self.names, 0)
        self._free: dict[tuple, tuple[int, int]] = {}
        self._packs: dict[tuple, tuple[int, bool]] = {}

    def desc(self, name: str) -> ClusterDescription:
        return self.fleet.cluster(name)

    def touch(self, name: str) -> None:
        self._version[name] += 1

    def request(self, job: ReplayJob) -> JobRequest:
        req = self._requests.get(job.key)
        if req is None:
            req = self._requests[job.key] = request_from_spec(spec_for(job))
        return req

    # -- static: could this job ever run there? -------------------------------------
    def eligible(self, job: ReplayJob) -> list[str]:
        """Clusters (fleet order) where the job could run if they were idle: a pool of
        its class packs the whole gang, within the local quota and QoS caps."""
        key = _shape(job)
        found = self._eligible.get(key)
        if found is None:
            req = self.request(job)
            found = self._eligible[key] = [n for n in self.names if _could_ever_run(self.clusters[n], req)]
        return found

    # -- dynamic: free GPUs now ------------------------------------------------------
    def summed_free(self, name: str, job: ReplayJob) -> int:
        """Free GPUs for this job's class on the cluster, summed over nodes and pools:
        what a scheduler that ignores packing believes it can use."""
        key = (name, job.gpu_class, job.min_memory_gb)
        version = self._version[name]
        cached = self._free.get(key)
        if cached is not None and cached[0] == version:
            return cached[1]
        # every node of the class, whatever partition or quota: an inventory's view
        nodes = self.clusters[name].nodes
        pools = set(matching_pools(nodes, self.request(job)))
        free = sum(n.free for n in nodes if n.pool in pools)
        self._free[key] = (version, free)
        return free

    def summed_capacity(self, name: str, job: ReplayJob) -> int:
        """Every GPU of the job's class on the cluster, busy or not."""
        nodes = self.clusters[name].nodes
        pools = set(matching_pools(nodes, self.request(job)))
        return sum(n.gpus for n in nodes if n.pool in pools)

    def admits_now(self, name: str, job: ReplayJob) -> bool:
        """The whole gang fits on the free GPUs of one pool of its class now (any node of
        the cluster), and that pool's local quota (Kueue's, in the simulator's truth) has
        room for it: where it could start at once."""
        key = (name, job.gpu_class, job.min_memory_gb, job.gpus_per_worker, job.workers)
        version = self._version[name]
        cached = self._packs.get(key)
        if cached is not None and cached[0] == version:
            return cached[1]
        cluster = self.clusters[name]
        req, nodes = _as_taken(cluster, self.request(job)), cluster.nodes
        fits = any(
            _quota_room(cluster, nodes, p) >= req.total_gpus
            and pack([n for n in nodes if n.pool == p], req) is not None
            for p in matching_pools(nodes, req)
        )
        self._packs[key] = (version, fits)
        return fits

    def why_pending(self, name: str, job: ReplayJob, reason: Reason) -> str:
        """Why ``job``, just accepted at ``name`` and waiting there with the local
        ``reason``, did not start (the first rule that applies, see above)."""
        if reason is Reason.POLICY:
            return LOCAL_POLICY
        cluster = self.clusters[name]
        req = _as_taken(cluster, self.request(job))
        nodes = _candidate_nodes(cluster, req)
        pools = [p for p in matching_pools(nodes, req) if _quota_room(cluster, nodes, p) >= req.total_gpus]
        if not pools:
            return LOCAL_QUOTA
        if sum(n.free for n in nodes if n.pool in pools) < req.total_gpus:
            return CAPACITY
        if all(pack([n for n in nodes if n.pool == p], req) is None for p in pools):
            return FRAGMENTATION
        return QUEUE


def _as_taken(cluster: SimulatedCluster, req: JobRequest) -> JobRequest:
    """The request as the cluster takes it: on Slurm, each worker on a node of its own."""
    return replace(req, one_per_node=cluster.flavor == "slurm")


def _shape(job: ReplayJob) -> tuple:
    return (job.gpu_class, job.min_memory_gb, job.gpus_per_worker, job.workers)


def _candidate_nodes(cluster: SimulatedCluster, req: JobRequest) -> list[SimNode]:
    """The nodes the job may use: on Slurm, those of the partition it would land in."""
    if cluster.flavor != "slurm":
        return cluster.nodes
    try:
        partition = admission.slurm_partition(cluster.nodes, cluster.partitions, req, "")
    except Rejected:
        return []
    return [n for n in cluster.nodes if n.partition == partition]


def _quota_room(cluster: SimulatedCluster, nodes: Sequence[SimNode], pool: str) -> int:
    """GPUs Kueue would still admit in this flavor (no quota: the pool's free size)."""
    members = [n for n in nodes if n.pool == pool]
    if cluster.flavor != "kueue" or pool not in cluster.quotas:
        return sum(n.gpus for n in members)
    return cluster.quotas[pool] - sum(n.allocated for n in members)


def _could_ever_run(cluster: SimulatedCluster, req: JobRequest) -> bool:
    req = _as_taken(cluster, req)
    nodes = _candidate_nodes(cluster, req)
    if not nodes:
        return False
    if cluster.flavor == "slurm":
        cap = cluster.partitions[nodes[0].partition].max_gpus_per_job
        if cap is not None and req.total_gpus > cap:
            return False
    for pool in matching_pools(nodes, req):
        members = [n for n in nodes if n.pool == pool]
        nominal = cluster.quotas.get(pool) if cluster.flavor == "kueue" else None
        if nominal is not None and nominal < req.total_gpus:
            continue
        if pack(members, req, free_if_idle) is not None:
            return True
    return False
