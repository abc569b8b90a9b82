"""MultiKueue backend: one destination = a Kueue *manager* cluster and its workers.

Jobs are submitted to the manager exactly as for plain Kueue (a LocalQueue whose
ClusterQueue carries the MultiKueue admission check); Kueue copies the Job to
a worker.  The manager's Workload says which worker took it:
``status.clusterName`` once a worker admitted it, ``status.nominatedClusterNames``
while it is still being offered (the two are mutually exclusive).

Capacity is counted once.  Inventory reports the *workers' nodes*, each worker
once even when several MultiKueueConfigs list it, with node and pool names
prefixed "<worker>/"; the manager's own Nodes are never counted, and the
workers must not also be registered as separate destinations.  Workers are
read with their own read-only client configs (``workers``); a listed worker
with no config, an inactive MultiKueueCluster, or one that does not answer
contributes no pools (unknown capacity is not offered, it is not idle).
Queue statistics come from the manager's ClusterQueues, which gate dispatch.
"""

from __future__ import annotations

from typing import Any, Mapping

from broker.backends.base import InventorySnapshot, PoolInventory, Unavailable
from broker.backends.kube import inventory as inv
from broker.backends.kube.common import KubeClient, KubeConfig, condition
from broker.backends.kube.jobs import now_utc
from broker.backends.kube.kueue import KueueBackend


class MultiKueueBackend(KueueBackend):
    """``MultiKueueBackend(cluster, manager KubeConfig, settings, workers={name: KubeConfig})``."""

    kind = "multikueue"

    def __init__(
        self,
        *args: Any,
        workers: Mapping[str, KubeConfig | KubeClient] | None = None,
        multikueue_config: str = "",
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        self.multikueue_config = multikueue_config  # empty: every MultiKueueConfig
        self.workers = {name: c if isinstance(c, KubeClient) else KubeClient(c) for name, c in (workers or {}).items()}
        self.skipped_workers: dict[str, str] = {}  # worker -> why it has no pools (last sync)

    def worker_clusters(self) -> list[str]:
        """Active worker names from the manager's MultiKueueConfigs, each once, in order."""
        configs = self._custom("multikueueconfigs")
        if self.multikueue_config:
            configs = [c for c in configs if (c.get("metadata") or {}).get("name") == self.multikueue_config]
        names: list[str] = []
        for cfg in configs:
            names.extend((cfg.get("spec") or {}).get("clusters") or [])
        clusters = {(c.get("metadata") or {}).get("name"): c for c in self._custom("multikueueclusters")}
        out = []
        for name in dict.fromkeys(names):
            active = condition(clusters.get(name) or {}, "Active")
            if name not in clusters or (active and active.get("status") == "False"):
                self.skipped_workers[name] = "MultiKueueCluster missing or not Active"
                continue
            out.append(name)
        return out

    def inventory(self) -> InventorySnapshot:
        taken_at = now_utc()
        self.skipped_workers = {}
        pools: list[PoolInventory] = []
        for name in self.worker_clusters():
            pools.extend(self._worker_pools(name))
        return InventorySnapshot(cluster=self.cluster, taken_at=taken_at, pools=tuple(pools), queue=self.queue_stats())

    def _worker_pools(self, name: str) -> list[PoolInventory]:
        client = self.workers.get(name)
        if client is None:
            self.skipped_workers[name] = "no client configuration for this worker"
            return []
        try:
            nodes = inv.read_nodes(client, self.settings)
            pods = inv.read_gpu_pods(client)
        except Unavailable as exc:
            self.skipped_workers[name] = str(exc)
            return []
        return inv.build_pools(nodes, pods, self.settings, self.kind, inv.product_namer, prefix=f"{name}/")

    def close(self) -> None:
        super().close()
        for client in self.workers.values():
            client.close()
