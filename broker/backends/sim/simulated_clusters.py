"""The process-wide simulated fleet.

The broker's services build a fresh backend from a cluster row on every call, so the
simulated clusters cannot live in the backend objects: they live here, keyed by cluster
name, and every ``SimulatorBackend("onprem-slurm")`` in the process reaches the same one.
One clock and one duration registry are shared by all clusters of the fleet.

A process that was never handed a fleet (a Celery worker) builds it from a fleet file on
first use; the broker says which file and how fast the clock runs (``use_source``, from
the settings), the simulator reads no environment itself.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Sequence

from broker.backends.base import JobState
from broker.backends.sim.clock import SimClock
from broker.backends.sim.cluster import SimulatedCluster
from broker.backends.sim.model import SimNode
from broker.backends.sim.runtime import Runtimes


@dataclass(frozen=True)
class FleetSource:
    """The fleet file a process loads when it first needs a fleet, and its clock's speed-up
    over wall time (so the jobs of a worker's fleet progress by themselves)."""

    path: str
    time_scale: float

    def __post_init__(self) -> None:
        if not self.time_scale > 0:
            raise ValueError(f"time scale: expected a positive number, got {self.time_scale!r}")


class SimulatorFleet:
    _instance: "SimulatorFleet | None" = None
    _instance_lock = threading.Lock()
    _source: FleetSource | None = None

    def __init__(self, clock: SimClock | None = None, default_fraction: float = 0.5):
        self.clock = clock or SimClock()
        self.runtimes = Runtimes(default_fraction=default_fraction)
        self._clusters: dict[str, SimulatedCluster] = {}
        self._lock = threading.RLock()
        self._autoloaded = False

    @classmethod
    def instance(cls) -> "SimulatorFleet":
        """The process-wide fleet (created on first use)."""
        with cls._instance_lock:
            if cls._instance is None:
                cls._instance = cls(clock=_clock_for(cls._source))
            return cls._instance

    @classmethod
    def use_source(cls, source: FleetSource | None) -> None:
        """Where the process-wide fleet comes from when nobody built one (None: nowhere);
        a fleet already created keeps its clock and clusters."""
        with cls._instance_lock:
            cls._source = source

    @classmethod
    def reset(
        cls, clock: SimClock | None = None, default_fraction: float = 0.5, autoload: bool = False
    ) -> "SimulatorFleet":
        """Forget every simulated cluster and start over (tests, a fresh demo).

        ``autoload`` lets the next lookup load the fleet file of ``use_source``."""
        with cls._instance_lock:
            cls._instance = cls(clock=clock, default_fraction=default_fraction)
            cls._instance._autoloaded = not autoload
            return cls._instance

    def add(self, cluster: SimulatedCluster) -> SimulatedCluster:
        """Register (or replace) a cluster; it must run on this fleet's clock."""
        if cluster.clock is not self.clock or cluster.runtimes is not self.runtimes:
            raise ValueError("build clusters with fleet.add_cluster() to share its clock")
        with self._lock:
            self._clusters[cluster.name] = cluster
        return cluster

    def add_cluster(self, name: str, flavor: str, nodes: Sequence[SimNode] = (), **options: Any) -> SimulatedCluster:
        """Create a cluster on the fleet's clock; options as for SimulatedCluster."""
        cluster = SimulatedCluster(name, flavor, nodes, clock=self.clock, runtimes=self.runtimes, **options)
        return self.add(cluster)

    def get(self, name: str) -> SimulatedCluster:
        self._autoload()
        with self._lock:
            try:
                return self._clusters[name]
            except KeyError:
                raise KeyError(f"no simulated cluster named {name!r}") from None

    def names(self) -> list[str]:
        self._autoload()
        with self._lock:
            return list(self._clusters)

    def remove(self, name: str) -> None:
        with self._lock:
            self._clusters.pop(name, None)

    def set_duration(self, workload_id: str, seconds: float, final_state: JobState = JobState.COMPLETED) -> None:
        """Trace replay: ``workload_id`` runs ``seconds`` wherever it lands."""
        self.runtimes.set(workload_id, seconds, final_state)

    def advance(self, seconds: float) -> None:
        """Move the shared clock and let every cluster catch up."""
        self.clock.advance(seconds)
        self.tick()

    def tick(self) -> None:
        with self._lock:
            clusters = list(self._clusters.values())
        for cluster in clusters:
            cluster.tick()

    def _autoload(self) -> None:
        # a Celery worker or runserver process that was never told to load the demo
        # fleet loads the broker's fleet file, so every process sees the same layout
        if self._autoloaded:
            return
        with self._lock:
            if self._autoloaded:
                return
            self._autoloaded = True
            source = SimulatorFleet._source
            if source is not None and not self._clusters:
                from broker.fleet_file import build_simulated_clusters, load_fleet

                build_simulated_clusters(load_fleet(source.path), self)


def _clock_for(source: FleetSource | None) -> SimClock:
    """A fleet loaded from a file runs on the wall clock, sped up; one built by hand (tests,
    replay) on a clock that moves only when told to."""
    if source is None:
        return SimClock()
    return SimClock(follow_wall=True, time_scale=source.time_scale)


def get_fleet() -> SimulatorFleet:
    return SimulatorFleet.instance()


def get_simulated_cluster(name: str) -> SimulatedCluster:
    """The process-wide simulated cluster of that name (KeyError when there is none)."""
    return SimulatorFleet.instance().get(name)


def set_duration(workload_id: str, seconds: float, final_state: JobState = JobState.COMPLETED) -> None:
    SimulatorFleet.instance().set_duration(workload_id, seconds, final_state)


__all__ = ["FleetSource", "SimulatorFleet", "get_fleet", "get_simulated_cluster", "set_duration"]
