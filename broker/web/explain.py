"""Plain words for the normalised local queue reasons shown to researchers."""

from __future__ import annotations

PLAIN_REASONS = {
    "none": "",
    "policy": "Held by a policy limit at the cluster (quota, QoS or association). Waiting alone may not help.",
    "capacity": "Waiting for GPUs: there is no room for the whole job right now.",
    "gang": "Waiting for the whole gang: some workers fit, all must start together.",
    "held": "Held by a user or an administrator at the cluster.",
    "unavailable": "The cluster's queue or partition is unavailable at the moment.",
    "waiting": "Waiting for a dependency or a start time.",
    "other": "Waiting for a reason the scheduler gives below.",
}

RULE_WORDS = {
    "policy": "not allowed by policy",
    "quota": "over the global quota",
    "gpu_compat": "no matching GPU model",
    "gpu_memory": "GPUs too small",
    "partitioning": "MIG profile does not match",
    "residency": "outside the allowed regions",
    "data_access": "cannot reach the data",
    "health": "unhealthy",
    "draining": "draining",
    "stale": "inventory too old",
    "ownership": "GPUs claimed by two schedulers",
    "topology": "the whole gang does not fit",
    "rejected": "rejected the job",
    "local_limit": "its own admission would never take it",
    "never_fits": "too small for the job even when idle",
    "local_quota": "its own quota is used up for now",
}


def plain_reason(reason: str) -> str:
    return PLAIN_REASONS.get(reason or "none", PLAIN_REASONS["other"])
