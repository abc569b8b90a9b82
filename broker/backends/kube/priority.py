"""What a job runs at on Kubernetes: Kueue's WorkloadPriorityClass, Volcano's PriorityClass."""

from __future__ import annotations

from typing import Mapping

from broker.spec import WorkloadSpec


def priority_class_of(spec: WorkloadSpec, mapping: Mapping[str, str]) -> str | None:
    """What a job runs at: its fleet priority class's name here when the mapping has one,
    else its level's ("normal" runs at the cluster's default)."""
    if spec.priority_class and mapping.get(spec.priority_class):
        return mapping[spec.priority_class]
    if spec.priority != "normal":
        return mapping.get(spec.priority) or None
    return None
