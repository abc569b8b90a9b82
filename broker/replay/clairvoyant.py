"""The clairvoyant FIFO: one global scheduler over every cluster that knows every run time.

It is a baseline, not a bound: FIFO with reservations can wait longer than other orders (its
p95 is above the race's in several committed cells); the bound is ``lower_bound.py``.

It sees all clusters as one machine room and knows every job's true run time (which no
real scheduler does).  One global queue in arrival order with EASY backfill:

* a job starts as soon as its whole gang packs on the free GPUs of one pool of one
  cluster, within that cluster's local limits (Kueue quota room, Slurm per-job caps: the
  same "could ever run" rules as every baseline); cheapest cluster first among those;
* the first waiting job of each GPU class that cannot start gets a reservation: the
  earliest instant, over all clusters, at which running jobs (by their true ends) leave
  room for it, and the GPUs it will take then;
* a later job of that class starts now only if it ends (truly) before that instant, or
  runs elsewhere, or leaves the reserved GPUs free.

It sends a job to a cluster only when it starts there at once, so the local queues
never hold anything of its.  Neither its waits nor its cloud spend bound anything: it uses
the cloud whenever that is sooner, and FIFO order is not the order that waits least.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from broker.backends.sim.model import SimNode
from broker.backends.sim.placement import Placement, matching_pools, pack
from broker.replay.baselines import _Baseline
from broker.replay.jobs import ReplayJob
from broker.replay.loop import ReplayEnv
from broker.replay.simview import _candidate_nodes, _quota_room
from broker.replay.tracker import Start


@dataclass
class _Reservation:
    shadow_s: float
    cluster: str
    free_at_shadow: dict[str, int]  # node -> GPUs free then
    job: ReplayJob


class ClairvoyantFifo(_Baseline):
    name = "clairvoyant-fifo"

    def begin(self, env: ReplayEnv) -> None:
        super().begin(env)
        self.waiting: list[ReplayJob] = []
        # (cluster, destination job) -> (true end, placement)
        self.running: dict[tuple[str, str], tuple[float, Placement]] = {}

    def step(self, now: float, arrivals: Sequence[ReplayJob]) -> tuple[list[Start], set[str]]:
        self.running = {k: v for k, v in self.running.items() if v[0] > now}
        starts: list[Start] = []
        still: list[ReplayJob] = []
        reserved: dict[str, _Reservation | None] = {}  # GPU class -> its reservation
        stuck: set[tuple] = set()  # shapes that pack nowhere now
        for job in [*self.waiting, *arrivals]:
            if not self.env.view.eligible(job):
                continue  # can never run anywhere: never placed (as every baseline)
            shape = (job.gpu_class, job.min_memory_gb, job.gpus_per_worker, job.workers)
            found = None if shape in stuck else self._where(job, now, reserved.get(job.gpu_class))
            if found is None:
                if shape not in stuck and self._packs_nowhere(job):
                    stuck.add(shape)
                if job.gpu_class not in reserved:
                    reserved[job.gpu_class] = self._reserve(job, now)
                still.append(job)
                continue
            cluster, placement = found
            sent = self._submit(job, cluster, now)
            if sent is None:
                still.append(job)
                continue
            self.running[(cluster, sent[0])] = (now + job.duration_s, placement)
            if sent[1] is not None:
                starts.append(sent[1])
        self.waiting = still
        return starts, set()

    # -- where it starts now ----------------------------------------------------------
    def _options(self, job: ReplayJob) -> list[tuple[str, Placement]]:
        """(cluster, placement) where the gang starts now, cheapest cluster first."""
        view = self.env.view
        req = view.request(job)
        out: list[tuple[float, int, str, Placement]] = []
        eligible = view.eligible(job)
        for name in eligible:
            cluster = view.clusters[name]
            nodes = _candidate_nodes(cluster, req)
            for pool in matching_pools(nodes, req):
                if _quota_room(cluster, nodes, pool) < job.total_gpus:
                    continue
                placement = pack([n for n in nodes if n.pool == pool], req)
                if placement is not None:
                    out.append((view.desc(name).price_per_gpu_hour, eligible.index(name), name, placement))
                    break
        return [(name, placement) for _, _, name, placement in sorted(out)]

    def _packs_nowhere(self, job: ReplayJob) -> bool:
        return not self._options(job)

    def _where(self, job: ReplayJob, now: float, reservation: _Reservation | None) -> tuple[str, Placement] | None:
        for cluster, placement in self._options(job):
            if reservation is None or self._spares(reservation, job, cluster, placement, now):
                return cluster, placement
        return None

    def _spares(self, r: _Reservation, job: ReplayJob, cluster: str, placement: Placement, now: float) -> bool:
        """Starting ``job`` there now does not push back the reserved job."""
        if cluster != r.cluster or now + job.duration_s <= r.shadow_s:
            return True
        free = dict(r.free_at_shadow)
        for node, gpus in placement:
            if node in free:
                free[node] -= gpus
        return self._packs_with(r.cluster, r.job, free)

    # -- reservations -------------------------------------------------------------------
    def _reserve(self, job: ReplayJob, now: float) -> _Reservation | None:
        best: _Reservation | None = None
        for cluster in self.env.view.eligible(job):
            found = self._earliest(job, cluster, now)
            if found is not None and (best is None or found.shadow_s < best.shadow_s):
                best = found
        return best

    def _earliest(self, job: ReplayJob, cluster: str, now: float) -> _Reservation | None:
        nodes = self.env.view.clusters[cluster].nodes
        free = {n.name: n.free for n in nodes}
        ends = sorted((end, placement) for (name, _), (end, placement) in self.running.items() if name == cluster)
        for end, placement in ends:
            for node, gpus in placement:
                free[node] = free.get(node, 0) + gpus
            if self._packs_with(cluster, job, free):
                return _Reservation(max(end, now), cluster, free, job)
        return None

    def _packs_with(self, cluster: str, job: ReplayJob, free: dict[str, int]) -> bool:
        """The gang packs on one pool of ``cluster`` given these free GPUs, within quota."""
        view = self.env.view
        sim_cluster, req = view.clusters[cluster], view.request(job)
        nodes = _candidate_nodes(sim_cluster, req)
        for pool in matching_pools(nodes, req):
            members: list[SimNode] = [n for n in nodes if n.pool == pool]
            quota = sim_cluster.quotas.get(pool) if sim_cluster.flavor == "kueue" else None
            used = sum(n.gpus - free.get(n.name, 0) for n in members)
            if quota is not None and quota - used < job.total_gpus:
                continue
            if pack(members, req, lambda n: max(0, free.get(n.name, 0))) is not None:
                return True
        return False

    def finish(self, now: float) -> dict[str, int]:
        return {"held at broker": len(self.waiting)}
