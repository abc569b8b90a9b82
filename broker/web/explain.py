"""Plain words for the normalised local queue reasons shown to researchers."""

from __future__ import annotations

PLAIN_REASONS = {
    "none": "",
    "policy": "Held by a policy limit at the cluster (quota, QoS or association). Waiting alone may not help.",
    "capacity": "Waiting for GPUs: there is no room for the whole job right now.",
    "gang": "Waiting for the whole gang: some workers fit, all must start together.",
    "held": "Held by a user or an administrator at the cluster.",
    "unavailable": "The cluster's queue or partition is unavailable at the moment.",
    "waiting": "Waiting for a start time (an off-peak window) or a dependency.",
    "other": "Waiting for a reason the scheduler gives below.",
}

RULE_WORDS = {
    "policy": "not allowed by policy",
    "quota": "over the global quota",
    "gpu_compat": "no matching GPU model",
    "gpu_memory": "GPUs too small",
    "partitioning": "whole GPUs, MIG slices or shares do not match",
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
    "off_peak": "its off-peak window is closed now",
}


# The one way to REJECTED: the broker found that no cluster could hold the whole job even
# when idle.  Its reason field says "policy" (the clusters' own limits are among the
# causes), but nothing is held at a cluster, and the text below it is the broker's.
REJECTED_WORDS = (
    "Rejected by the broker: no cluster could run the whole job, even when idle, so it was not left to wait. "
    "Each cluster's reason is below; change the job (fewer workers or GPUs per worker, another GPU class) "
    "and run it again."
)


def plain_reason(reason: str) -> str:
    return PLAIN_REASONS.get(reason or "none", PLAIN_REASONS["other"])


def reason_words(state: str, reason: str) -> tuple[str, str]:
    """What the status line says about why, and whose words follow it (the raw text)."""
    if state == "rejected":
        return REJECTED_WORDS, "Broker says"
    # waiting at the broker: the text is the broker's own (why each cluster is out)
    return plain_reason(reason), "Broker says" if state == "waiting" else "Scheduler says"
