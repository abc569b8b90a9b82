"""The demo's reads: its simulated clusters' saved state, and what the broker follows on them."""

from __future__ import annotations

from typing import Any, Mapping

from broker.lifecycle import FOLLOWED_STATES
from broker.models import Workload
from demo.models import SimulatedClusterState


def simulated_cluster_states() -> dict[str, Mapping[str, Any]]:
    """Cluster name -> its saved state."""
    return dict(SimulatedClusterState.objects.values_list("cluster", "state"))


def followed_workloads_on(cluster: str) -> int:
    """Workloads the broker follows on that cluster through a destination job."""
    return (
        Workload.objects.filter(cluster__name=cluster, state__in=FOLLOWED_STATES).exclude(destination_job_id="").count()
    )
