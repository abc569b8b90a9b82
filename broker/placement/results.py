"""What a placement decision returns: ranked candidates, exclusions, and why."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from broker.jsontypes import JsonObject

# Filter rules in the order they are applied; a cluster's exclusion names the first one
# that stopped it (for clusters with several pools: the pool that got furthest).
RULES = (
    "policy",
    "quota",
    "gpu_compat",
    "gpu_memory",
    "partitioning",
    "residency",
    "data_access",
    "health",
    "draining",
    "stale",
    "ownership",
    "local_limit",
    "never_fits",
    "off_peak",
    "local_quota",
    "topology",
)
RULE_RANK = {rule: i for i, rule in enumerate(RULES)}
# Passing every rule before these means the cluster is compatible by policy.
UNAVAILABLE_RULES = frozenset({"health", "draining", "stale", "ownership"})
# A local quota used up now (``local_quota``) frees as jobs end: waiting, like a full pool.
CAPACITY_RULES = frozenset({"local_quota", "topology"})
# A local limit (QoS, partition, ClusterQueue quota) that the whole job exceeds, or a pool
# too small even when idle: waiting will not change these.
NEVER_RULES = frozenset({"local_limit", "never_fits"})

REASON_CAPACITY = "capacity"  # compatible somewhere, but the gang does not fit now
REASON_POLICY = "policy"  # policy, quota, residency or hardware rule it out
REASON_UNAVAILABLE = "unavailable"  # the compatible clusters are stale, unhealthy, draining
REASON_WAITING = "waiting"  # the compatible clusters' off-peak windows are closed


@dataclass(frozen=True)
class Exclusion:
    rule: str
    message: str


@dataclass(frozen=True)
class Candidate:
    cluster: str
    pool: str
    score: float  # lower is better; the sum of ``weighted``
    breakdown: Mapping[str, float]  # each term's estimate in its unit (see TERMS)
    weighted: Mapping[str, float]  # each term normalised across candidates x weight
    assignment: tuple[str, ...]  # the node of each worker, by worker rank
    gpus_per_worker: int = 1
    # how the terms came about: staging time, where the data leaves from and its egress price
    detail: Mapping[str, float | str] = field(default_factory=dict)
    # the pool's units per GPU: a job of GPU shares is charged gpus / this (1: whole units)
    units_per_gpu: int = 1

    def to_dict(self) -> JsonObject:
        out: JsonObject = {
            "cluster": self.cluster,
            "pool": self.pool,
            "score": round(self.score, 6),
            "breakdown": dict(self.breakdown),
            "weighted": dict(self.weighted),
            "assignment": list(self.assignment),
            "gpus_per_worker": self.gpus_per_worker,
            "detail": dict(self.detail),
        }
        if self.units_per_gpu != 1:  # a pool of shares; whole units are the rule and go unsaid
            out["units_per_gpu"] = self.units_per_gpu
        return out


@dataclass(frozen=True)
class PlacementResult:
    ranked: list[Candidate]
    excluded: dict[str, Exclusion]
    reason: str = ""  # set only when nothing is eligible
    policy_version: str = ""
    weights: Mapping[str, float] = field(default_factory=dict)

    @property
    def best(self) -> Candidate | None:
        return self.ranked[0] if self.ranked else None

    def to_dict(self) -> JsonObject:
        """JSON-ready, for the decision's audit record."""
        return {
            "policy_version": self.policy_version,
            "reason": self.reason,
            "weights": dict(self.weights),
            "ranked": [c.to_dict() for c in self.ranked],
            "excluded": {k: {"rule": v.rule, "message": v.message} for k, v in sorted(self.excluded.items())},
        }


def no_fit_reason(excluded: Mapping[str, Exclusion]) -> str:
    """Why nothing is eligible: capacity beats a closed off-peak window beats unavailable
    beats policy, because a
    cluster that got as far as the gang-fit check may take the job later, and a merely
    stale cluster may come back, while a policy exclusion will not change by waiting."""
    rules = {e.rule for e in excluded.values()}
    if rules & CAPACITY_RULES:
        return REASON_CAPACITY
    if "off_peak" in rules:
        return REASON_WAITING
    if not excluded or rules & UNAVAILABLE_RULES:
        return REASON_UNAVAILABLE
    return REASON_POLICY
