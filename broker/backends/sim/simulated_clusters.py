"""The process-wide simulated fleet.

The broker's services build a fresh backend from a cluster row on every call, so the
simulated clusters cannot live in the backend objects: they live here, keyed by cluster
name, and every ``SimulatorBackend("onprem-slurm")`` in the process reaches the same one.
One clock and one duration registry are shared by all clusters of the fleet.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Sequence

from broker.backends.base import JobState
from broker.backends.sim.clock import SimClock
from broker.backends.sim.cluster import SimulatedCluster
from broker.backends.sim.model import SimNode
from broker.backends.sim.runtime import Runtimes

FLEET_ENV = "BROKER_SIM_FLEET"
TIME_SCALE_ENV = "BROKER_SIM_TIME_SCALE"  # a fleet YAML to load when a process first needs one


class SimulatorFleet:
    _instance: "SimulatorFleet | None" = None
    _instance_lock = threading.Lock()

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
                cls._instance = cls(clock=_clock_from_env())
            return cls._instance

    @classmethod
    def reset(
        cls, clock: SimClock | None = None, default_fraction: float = 0.5, autoload: bool = False
    ) -> "SimulatorFleet":
        """Forget every simulated cluster and start over (tests, a fresh demo).

        ``autoload`` lets the next lookup load the fleet file named by $BROKER_SIM_FLEET."""
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
        # fleet finds it through the environment, so every process sees the same layout
        if self._autoloaded:
            return
        with self._lock:
            if self._autoloaded:
                return
            self._autoloaded = True
            path = os.environ.get(FLEET_ENV, "")
            if path and not self._clusters:
                from broker.fleet_file import build_simulated_clusters, load_fleet

                build_simulated_clusters(load_fleet(path), self)


def _clock_from_env() -> SimClock:
    """A process that finds its fleet through $BROKER_SIM_FLEET (a Celery worker) runs it on
    the wall clock when $BROKER_SIM_TIME_SCALE is set, so its jobs progress by themselves."""
    scale = os.environ.get(TIME_SCALE_ENV, "").strip()
    if not scale:
        return SimClock()
    try:
        return SimClock(follow_wall=True, time_scale=float(scale))
    except ValueError:
        raise ValueError(f"{TIME_SCALE_ENV}: expected a positive number, got {scale!r}") from None


def get_fleet() -> SimulatorFleet:
    return SimulatorFleet.instance()


def get_simulated_cluster(name: str) -> SimulatedCluster:
    """The process-wide simulated cluster of that name (KeyError when there is none)."""
    return SimulatorFleet.instance().get(name)


def set_duration(workload_id: str, seconds: float, final_state: JobState = JobState.COMPLETED) -> None:
    SimulatorFleet.instance().set_duration(workload_id, seconds, final_state)


__all__ = ["FLEET_ENV", "SimulatorFleet", "get_fleet", "get_simulated_cluster", "set_duration"]
