"""GPU shares on Kubernetes (time-slicing or MPS replicas): which jobs asked for them, and how
many replicas a shared GPU is advertised as, so that their usage is charged the share.

A job of shares carries the required node affinity ``common.placement`` gives it (the sharing
label In time-slicing, mps); its GPU requests count replicas. The replicas a GPU is split into
are the nodes' ``nvidia.com/gpu.replicas`` label: read once per usage read, and where shared
nodes differ the fewest are taken, so a replica is never charged less than it may be worth.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from broker.backends.json_fields import Fields
from broker.backends.kube.common import SHARING_LABEL, SHARING_STRATEGIES

REPLICAS_LABEL = "nvidia.com/gpu.replicas"


def replicas_of(labels: Mapping[str, str]) -> int:
    """Units a shared GPU is advertised as; 1 where the label is missing or unreadable."""
    raw = labels.get(REPLICAS_LABEL, "")
    return int(raw) if raw.isascii() and raw.isdigit() and int(raw) > 0 else 1


def asks_shares(pod_spec: Fields) -> bool:
    """The pod was sent to shared GPUs: its required node affinity names the sharing label."""
    required = pod_spec.obj("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
    return any(
        expr.text("key") == SHARING_LABEL and expr.text("operator") == "In"
        for term in required.objs("nodeSelectorTerms")
        for expr in term.objs("matchExpressions")
    )


class ReplicaRatios:
    """Replicas a GPU of the cluster's shared nodes is split into, listed once when asked."""

    def __init__(self, nodes: Callable[[], Iterable[Mapping[str, Any]]]):
        self._nodes = nodes
        self._fewest: int | None = None

    def __call__(self) -> int:
        if self._fewest is None:
            shared = [
                replicas_of(labels)
                for node in self._nodes()
                if (labels := Fields(node).obj("metadata").texts("labels")).get(SHARING_LABEL) in SHARING_STRATEGIES
            ]
            self._fewest = min(shared, default=1)
        return self._fewest


def workload_share(wl: Mapping[str, Any], ratios: ReplicaRatios) -> int:
    """Replicas a GPU is split into for a Kueue Workload of shares; 1 for whole GPUs."""
    return _share((ps.obj("template", "spec") for ps in Fields(wl).obj("spec").objs("podSets")), ratios)


def vcjob_share(job: Mapping[str, Any], ratios: ReplicaRatios) -> int:
    """Replicas a GPU is split into for a Volcano job of shares; 1 for whole GPUs."""
    return _share((t.obj("template", "spec") for t in Fields(job).obj("spec").objs("tasks")), ratios)


def _share(pod_specs: Iterable[Fields], ratios: ReplicaRatios) -> int:
    return ratios() if any(asks_shares(spec) for spec in pod_specs) else 1
