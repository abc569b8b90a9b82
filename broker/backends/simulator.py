"""The fleet simulator backend: the Backend protocol over a process-wide simulated fleet.

For demos, tests and trace replay.  Each ``SimulatedCluster`` (see ``broker.backends.sim``)
mimics the local semantics of its flavor (Slurm partitions and QoS, Kueue flavor quota,
Volcano gangs); this module adds what a network in between adds: the fault switches.
A backend object holds only the cluster's name, so constructing one per call (as the
broker's services do) is cheap and always reaches the same simulated state.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Iterator, Sequence

from broker import runtime
from broker.backends.base import (
    DestinationJob,
    InventorySnapshot,
    LogPage,
    ProjectIdentity,
    Rejected,
    Unavailable,
    UsageRecord,
)
from broker.backends.sim import (
    Faults,
    NodeGroup,
    Partition,
    Runtimes,
    SimClock,
    SimJob,
    SimNode,
    SimulatedCluster,
    SimulatorFleet,
    get_fleet,
    get_simulated_cluster,
    set_duration,
)
from broker.backends.sim.limits import local_limits
from broker.spec import WorkloadSpec

DEFAULT_TIMEOUT_S = 10.0

_REJECT_RAW = {
    "slurm": "sbatch: error: Batch job submission failed: {reason}",
    "kueue": "admission webhook denied the request: {reason}",
    "volcano": 'admission webhook "validatejob.volcano.sh" denied the request: {reason}',
}


class SimulatorBackend:
    kind = "simulator"

    def __init__(self, cluster_name: str, fleet: SimulatorFleet | None = None, timeout_s: float = DEFAULT_TIMEOUT_S):
        self.cluster = cluster_name
        self.timeout_s = timeout_s
        self._fleet = fleet

    def _reach(self) -> SimulatedCluster:
        """The cluster, after the network's part: unreachable, or slow (bounded)."""
        fleet = self._fleet or SimulatorFleet.instance()
        try:
            sim = fleet.get(self.cluster)
        except KeyError as exc:
            raise Unavailable(str(exc)) from None
        faults = sim.faults
        if faults.unreachable:
            raise Unavailable(f"{self.cluster}: connection refused (simulated outage)")
        if faults.slow_s > 0:
            # the caller's timeout bounds the wait; past it the answer is as good as lost
            runtime.sleep(min(faults.slow_s, self.timeout_s))  # a simulated run moves its own clock
            if faults.slow_s > self.timeout_s:
                raise Unavailable(f"{self.cluster}: no answer within {self.timeout_s:g}s")
        return sim

    def inventory(self) -> InventorySnapshot:
        sim = self._reach()
        return replace(sim.inventory(), limits=local_limits(sim))

    def submit(self, spec: WorkloadSpec, workload_id: str, identity: ProjectIdentity) -> str:
        sim = self._reach()
        if sim.faults.rejects:
            reason = sim.faults.rejects
            raise Rejected(reason, _REJECT_RAW[sim.flavor].format(reason=reason))
        job_id = sim.submit(spec, workload_id, identity)
        if sim.take_fault("accepts_but_times_out"):
            # the job exists; only the reply is lost: callers must find() before retrying
            raise Unavailable(f"{self.cluster}: submit timed out waiting for the reply")
        return job_id

    def find(self, workload_id: str) -> DestinationJob | None:
        return self._reach().find(workload_id)

    def status(self, job_ids: Sequence[str]) -> dict[str, DestinationJob]:
        return self._reach().status(job_ids)

    def active_jobs(self) -> list[DestinationJob]:
        return self._reach().active_jobs()

    def cancel(self, job_id: str) -> bool:
        return self._reach().cancel(job_id)

    def usage(self, since: datetime) -> Iterator[UsageRecord]:
        return self._reach().usage(since)

    def logs(
        self, job_id: str, *, worker: str = "", offset: int | None = None, limit: int = 200, tail: int | None = None
    ) -> LogPage:
        return self._reach().logs(job_id, worker=worker, offset=offset, limit=limit, tail=tail)


__all__ = [
    "DEFAULT_TIMEOUT_S",
    "Faults",
    "NodeGroup",
    "Partition",
    "Runtimes",
    "SimClock",
    "SimJob",
    "SimNode",
    "SimulatedCluster",
    "SimulatorBackend",
    "SimulatorFleet",
    "get_fleet",
    "get_simulated_cluster",
    "set_duration",
]
