"""The ranking terms: each an estimate in its own unit, then normalised and weighted.

Every term is "lower is better".  Terms are normalised by dividing by their largest
value among the eligible candidates, so each lies in 0..1 and a preset's weights say
how much each matters; a term that is 0 everywhere contributes nothing.
"""

from __future__ import annotations

from operator import mul
from typing import Sequence

from broker.cluster_report import QueueStats
from broker.placement.facts import ClusterFacts
from broker.placement.policy import TERMS, Aging, QueueModel
from broker.spec import WorkloadSpec


def queue_wait_s(queue: QueueStats, model: QueueModel) -> float:
    """Pending GPU-hours ahead of us / the GPU-hours the cluster gets through per hour.

    Only clusters where the gang fits now are ranked, so an empty queue means no wait.
    Unknown throughput (0) with work pending is treated as the worst case, the cap."""
    if queue.pending_gpus <= 0 and queue.pending_jobs <= 0:
        return 0.0
    demand_gpu_h = max(queue.pending_gpus, 0) * model.assumed_job_hours
    if queue.gpu_hours_per_hour <= 0:
        return model.max_wait_s
    return min(demand_gpu_h / queue.gpu_hours_per_hour * 3600.0, model.max_wait_s)


def staging_s_per_gb(facts: ClusterFacts, data_location: str) -> float:
    """Seconds to stage one GB of the job's data here (0 when the data is local)."""
    if facts.data_is_local(data_location):
        return 0.0
    bandwidth = facts.bandwidth_to(data_location)
    return 8.0 / bandwidth if bandwidth > 0 else float("inf")


def startup_s(facts: ClusterFacts, data_location: str, data_size_gb: float) -> float:
    """Image pull + node provisioning + data staging (size x 8 / Gbps)."""
    staging = data_size_gb * staging_s_per_gb(facts, data_location) if data_size_gb else 0.0
    return facts.image_pull_s + facts.provisioning_s + staging


def runtime_hours(spec: WorkloadSpec, history_hours: float | None = None) -> float:
    """Expected runtime: a runtime learnt from history when given, else the time limit."""
    if history_hours is not None and history_hours > 0:
        return min(history_hours, spec.time_limit_minutes / 60.0)
    return spec.time_limit_minutes / 60.0


def gpu_cost(price_per_gpu_hour: float, total_gpus: int, hours: float) -> float:
    return price_per_gpu_hour * total_gpus * hours


def transfer_cost(
    facts: ClusterFacts, data_location: str, data_size_gb: float, source: ClusterFacts | None = None
) -> float:
    """Egress for moving the data here, priced where it leaves: the storage's owner
    (``source``, the cluster that lists the location as local) charges per GB to this
    cluster's region.  Nothing when the data is already local or its owner is unknown."""
    if facts.data_is_local(data_location) or source is None:
        return 0.0
    return source.egress_to(facts.region) * data_size_gb


def location_penalty(facts: ClusterFacts, preferred: str | None) -> float:
    """1 when the preset prefers another location (on-prem-first, cloud-first), else 0."""
    return 1.0 if preferred and facts.location != preferred else 0.0


def data_remote(facts: ClusterFacts, data_location: str) -> float:
    return 0.0 if facts.data_is_local(data_location) else 1.0


def aged_weights(weights: dict[str, float], age_s: float, aging: Aging) -> dict[str, float]:
    """The longer a workload has waited, the more a short queue matters to it."""
    if age_s <= 0 or aging.queue_weight_per_hour <= 0:
        return weights
    boost = min(age_s / 3600.0 * aging.queue_weight_per_hour, aging.max_boost)
    out = dict(weights)
    out["queue_wait_s"] = out.get("queue_wait_s", 0.0) + boost
    return out


def combine(rows: Sequence[Sequence[float]], weights: dict[str, float]) -> list[tuple[float, tuple[float, ...]]]:
    """Normalise each term column by its maximum and weight it.

    ``rows`` hold the raw terms in TERMS order; returns (score, weighted terms) per row."""
    if not rows:
        return []
    scales = []
    for term, column in zip(TERMS, zip(*rows, strict=True), strict=True):
        top = max(column)
        scales.append(weights.get(term, 0.0) / top if top > 0 else 0.0)
    out = []
    for row in rows:
        weighted = tuple(map(mul, row, scales))
        out.append((sum(weighted), weighted))
    return out
