"""A simulated cluster's state as JSON, so that the demo keeps its jobs across a restart.

Saved: every job (request, account, partition, state, reasons, its instants and run time, its
final state, placement), each node's allocation and health, the cluster's quotas, its job
numbering, its position in time and the clock's lead over wall time.  Not saved: the layout
(nodes, partitions, queues), which the fleet file builds again, and the fault switches (a
restart reconnects a cluster the outage switch cut off).

Instants are seconds on the saving clock, saved with that clock's origin: the restarted
process's clock has another origin, and each instant is moved by the difference.  A
wall-following clock (the demo) gets its lead over wall time back, so simulated time goes on
as if the cluster had kept running while the process was down: a job whose end passed
meanwhile has ended at that instant once the cluster catches up, and what waited behind it
started in the room it left, when it would have.  A manual clock (tests, replay) is moved on
to where the saved cluster stood.
"""

from __future__ import annotations

import dataclasses
import itertools
from datetime import datetime
from typing import TYPE_CHECKING, Any, Mapping

from broker.backends.base import JobState, Reason
from broker.backends.sim.model import JobRequest, SimJob, SimNode
from broker.jsontypes import Json, JsonObject

if TYPE_CHECKING:
    from broker.backends.sim.cluster import SimulatedCluster

VERSION = 1
_INSTANTS = ("submitted_at", "started_at", "ended_at", "first_started_at", "ready_at")
_ENUMS: dict[str, type[JobState] | type[Reason]] = {"state": JobState, "final_state": JobState, "reason": Reason}
_NODE_STATE = ("allocated", "healthy", "draining", "extra_owners")


def to_json(self: SimulatedCluster) -> JsonObject:
    """The cluster's state as of the clock's now (it catches up first)."""
    with self._lock:
        self._catch_up()
        upcoming = next(self._seq)  # reading the counter takes a number: put it back
        self._seq = itertools.count(upcoming)
        pools = self._live.pool_of()
        return {
            "version": VERSION,
            "cluster": self.name,
            "flavor": self.flavor,
            "origin": self.clock.origin.isoformat(),
            "lead_s": self.clock.lead_s,
            "cursor": self._cursor,
            "created": self._created,
            "next_number": upcoming,
            "quotas": dict(self.quotas),
            "nodes": {n.name: _node_json(n) for n in self._nodes},
            "jobs": [_job_json(j, pools.get(j.job_id)) for j in self._jobs.values()],
        }


def load_json(self: SimulatedCluster, state: Mapping[str, Any]) -> int:
    """Put a saved state back into this cluster, built again from the same fleet file and
    holding no job yet; returns how many jobs came back.  A state that does not fit (another
    cluster, a node the layout no longer has) is refused with ValueError, and one that does
    not read fails, before anything changes."""
    _check(self, state)
    shift = self.clock.to_seconds(datetime.fromisoformat(state["origin"]))
    jobs = sorted((_job_from(j, shift) for j in state["jobs"]), key=lambda j: j[0].seq)
    with self._lock:
        if self._jobs:
            raise ValueError(f"cluster {self.name} already has jobs: restore into a fresh one")
        _move_clock(self, state)
        _put_back(self, state, jobs, shift)
        return len(jobs)


def _put_back(
    self: SimulatedCluster, state: Mapping[str, Any], jobs: list[tuple[SimJob, str | None]], shift: float
) -> None:
    for name, saved in state["nodes"].items():
        node = self.node(name)
        for key in _NODE_STATE:
            setattr(node, key, list(saved[key]) if key == "extra_owners" else saved[key])
        if node.elastic and "up" in saved:  # an elastic pool's node (sim.elastic); older saves: as built
            node.up, node.billed_s = bool(saved["up"]), float(saved["billed_s"])
            for key in ("requested_at", "ready_at", "idle_since"):
                setattr(node, key, None if saved[key] is None else float(saved[key]) + shift)
    self.quotas = {str(k): int(v) for k, v in state["quotas"].items()}
    self._jobs = {job.job_id: job for job, _ in jobs}
    for job, pool in jobs:
        _relive(self, job, pool)
    self._cursor, self._created = state["cursor"] + shift, state["created"] + shift
    self._seq = itertools.count(max([int(state["next_number"])] + [j.seq + 1 for j, _ in jobs]))


def _check(self: SimulatedCluster, state: Mapping[str, Any]) -> None:
    if state.get("version") != VERSION:
        raise ValueError(f"saved state of version {state.get('version')!r}; this simulator reads {VERSION}")
    if (state.get("cluster"), state.get("flavor")) != (self.name, self.flavor):
        raise ValueError(
            f"saved state of {state.get('cluster')!r} ({state.get('flavor')}), not of {self.name} ({self.flavor})"
        )
    gone = sorted(set(state["nodes"]) - {n.name for n in self._nodes})
    if gone:
        raise ValueError(f"cluster {self.name} no longer has nodes {gone}")


def _move_clock(self: SimulatedCluster, state: Mapping[str, Any]) -> None:
    """A wall clock gets its saved lead back (never less than it has: the fleet's clusters
    share it); a manual clock moves on to the saved cluster's position."""
    if self.clock.follow_wall:
        self.clock.advance(max(0.0, float(state["lead_s"]) - self.clock.lead_s))
    else:
        origin = datetime.fromisoformat(state["origin"])
        self.clock.advance_to(self.clock.to_seconds(origin) + float(state["cursor"]))


def _relive(self: SimulatedCluster, job: SimJob, pool: str | None) -> None:
    """Pending and running jobs go back into the live set scheduling looks at."""
    if not job.active:
        return  # ended or lost: kept for status, usage and logs only
    self._live.add(job)
    if job.enqueued and job.state is JobState.PENDING:
        self._live.wake_at(job)  # its pods may exist only later (Volcano): a pass is due then
    if job.state is JobState.RUNNING:
        assert pool is not None  # _job_from refuses a running job without one
        self._live.started(job, pool)


def _node_json(node: SimNode) -> JsonObject:
    out: JsonObject = {
        "allocated": node.allocated,
        "healthy": node.healthy,
        "draining": node.draining,
        "extra_owners": list(node.extra_owners),
    }
    if node.elastic:
        out.update(up=node.up, billed_s=node.billed_s, requested_at=node.requested_at, ready_at=node.ready_at,
                   idle_since=node.idle_since)  # fmt: skip
    return out


def _job_json(job: SimJob, pool: str | None) -> JsonObject:
    """Every field of the job (a field added to SimJob is saved too), plus the pool of a
    running job's GPUs (the live set's, which a quota-only admission has no node to tell)."""
    out: JsonObject = {}
    for f in dataclasses.fields(job):
        value = getattr(job, f.name)
        if f.name == "request":
            out[f.name] = _request_json(value)
        elif f.name == "placement":
            out[f.name] = [[node, gpus] for node, gpus in value]
        elif f.name in _ENUMS:
            out[f.name] = value.value
        elif f.name == "run_s" and value == float("inf"):
            out[f.name] = None  # admitted on quota without a time limit: never ends (JSON has no inf)
        else:
            out[f.name] = value
    out["pool"] = pool
    return out


def _request_json(request: JobRequest) -> JsonObject:
    data: dict[str, Json] = dict(dataclasses.asdict(request))
    data["gpu_models"] = list(request.gpu_models)
    return data


def _job_from(data: Mapping[str, Any], shift: float) -> tuple[SimJob, str | None]:
    values = {k: v for k, v in data.items() if k != "pool"}
    request = dict(values["request"])
    request["gpu_models"] = tuple(request["gpu_models"])
    values["request"] = JobRequest(**request)
    values["placement"] = [(str(node), int(gpus)) for node, gpus in values["placement"]]
    for name, kind in _ENUMS.items():
        values[name] = kind(values[name])
    values["run_s"] = float("inf") if values["run_s"] is None else float(values["run_s"])
    for name in _INSTANTS:
        if values[name] is not None:
            values[name] = float(values[name]) + shift
    job = SimJob(**values)
    if job.active and job.state is JobState.RUNNING and not data.get("pool"):
        raise ValueError(f"running job {job.job_id} was saved without the pool its GPUs are in")
    return job, data.get("pool")
