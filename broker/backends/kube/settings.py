"""Site conventions shared by the Kubernetes backends, from a cluster's config (factory.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping


@dataclass(frozen=True)
class BackendSettings:
    """Site conventions shared by the Kubernetes backends (all have defaults)."""

    default_namespace: str = "default"
    default_queue: str = "default"
    default_image: str = "nvcr.io/nvidia/pytorch:24.05-py3"
    # broker priority -> Kueue WorkloadPriorityClass / Kubernetes PriorityClass name
    priority_classes: Mapping[str, str] = field(
        default_factory=lambda: {"low": "gpubroker-low", "high": "gpubroker-high"}
    )
    # node label value of nvidia.com/gpu.product -> the broker's model name
    model_names: Mapping[str, str] = field(default_factory=dict)
    # broker GPU class -> accepted model names (used when a spec lists no models)
    gpu_classes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    node_selector: str = ""  # label selector of the nodes this scheduler owns
    tolerated_taints: tuple[str, ...] = ("nvidia.com/gpu",)  # not a sign of draining
    interconnect_label: str = "nvidia.com/gpu.clique"
    interconnect_affinity: bool = False  # every GPU node carries interconnect_label (topology.py)
    kueue_topology: bool = False  # Kueue TAS: the interconnect label is a level of the flavors' Topology
    # Volcano: the HyperNode tier that is the interconnect domain (0: none). A node's domain is
    # then the tier's HyperNode holding it, and a gang that must share one carries
    # networkTopology hard at that tier (topology.py)
    volcano_network_tier: int = 0
