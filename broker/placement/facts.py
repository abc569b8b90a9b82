"""Static facts about a cluster that its inventory report does not carry.

Inventory (``InventorySnapshot``) changes every sync; these facts change when an admin
edits the cluster, so they are kept apart and passed in beside the snapshots.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

LOCATIONS = ("onprem", "cloud")


def region_matches(region: str, patterns: tuple[str, ...]) -> bool:
    """'*' matches all; 'eu' matches 'eu' and 'eu-west-1' (a region family)."""
    for pattern in patterns:
        if pattern == "*" or region == pattern or region.startswith(pattern + "-"):
            return True
    return False


KINDS = ("slurm", "kueue", "volcano", "simulator")


@dataclass(frozen=True)
class ClusterFacts:
    name: str
    kind: str = "simulator"
    # Slurm (or a simulated Slurm): each worker of a gang on a node of its own, as the
    # Slurm backend asks (--nodes=workers, one task a node); Kubernetes packs pods
    one_worker_per_node: bool = False
    region: str = ""
    location: str = "onprem"  # "onprem" or "cloud"
    price_per_gpu_hour: float = 0.0  # on-prem: the internal chargeback rate
    # Egress is paid where data *leaves*: the price per GB of moving data out of this
    # cluster's data locations to another region (an object store's egress fee; on-prem
    # storage usually 0).  egress_by_region overrides it per destination region.
    egress_per_gb: float = 0.0
    egress_by_region: Mapping[str, float] = field(default_factory=dict)
    # Gbps from this cluster to each data location; locations not listed get the default.
    # A bandwidth of 0 means "no route": the data cannot be staged here at all.
    bandwidth_gbps: Mapping[str, float] = field(default_factory=dict)
    default_bandwidth_gbps: float = 1.0
    image_pull_s: float = 60.0
    provisioning_s: float = 0.0  # node autoscaling / VM boot before the pods start
    healthy: bool = True
    draining: bool = False
    data_locations: tuple[str, ...] = ()  # data reachable directly, no staging needed
    # Clusters that share physical machines (e.g. on-prem Slurm and on-prem Kueue) share a
    # node_domain, so a host claimed by both schedulers is caught.  Empty: the cluster name.
    node_domain: str = ""
    # Optional price per GPU-hour per pool name, overriding price_per_gpu_hour.
    pool_prices: Mapping[str, float] = field(default_factory=dict)
    # elastic pools (broker/elastic_pools.py): how long a node stays, billed, after its last
    # job ends; a job's expected cost there includes that idle tail
    idle_release_s: Mapping[str, float] = field(default_factory=dict)

    def data_is_local(self, location: str) -> bool:
        return not location or location in self.data_locations

    def bandwidth_to(self, location: str) -> float:
        return float(self.bandwidth_gbps.get(location, self.default_bandwidth_gbps))

    def egress_to(self, region: str) -> float:
        return float(self.egress_by_region.get(region, self.egress_per_gb))

    def price_for(self, pool: str) -> float:
        return float(self.pool_prices.get(pool, self.price_per_gpu_hour))

    @property
    def ownership_domain(self) -> str:
        return self.node_domain or self.name
