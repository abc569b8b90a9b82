"""Fleet simulator internals; the public face is ``broker.backends.simulator``."""

from broker.backends.sim.clock import SimClock
from broker.backends.sim.cluster import SimulatedCluster
from broker.backends.sim.model import Faults, NodeGroup, Partition, SimJob, SimNode
from broker.backends.sim.simulated_clusters import SimulatorFleet, get_fleet, get_simulated_cluster, set_duration
from broker.backends.sim.runtime import Runtimes

__all__ = [
    "Faults",
    "NodeGroup",
    "Partition",
    "Runtimes",
    "SimClock",
    "SimJob",
    "SimNode",
    "SimulatedCluster",
    "SimulatorFleet",
    "get_fleet",
    "get_simulated_cluster",
    "set_duration",
]
