"""The placement library: pure functions from inventory + policy + spec to a ranked,
explained choice of cluster and pool.  No ORM, no I/O.

One decision::

    result = place(snapshots, facts, spec, tenant="physics", quota_remaining=16,
                   now=now, policy=load_policy_file("broker/policy/default.yaml"))
    result.ranked[0].cluster, result.ranked[0].breakdown, result.excluded, result.reason

A scheduling pass (build once per inventory refresh, then decide per workload)::

    fleet = PreparedFleet(snapshots, facts, policy)
    for item in order_pending(pending, policy, shares):
        result = place_prepared(fleet, item.spec, tenant=item.tenant, quota_remaining=...,
                                now=now, age_s=item.age_s, limit=3, holder=item.key)
        if result.ranked:
            fleet.take(result.ranked[0])      # book it so the pass does not double-book
        elif should_hold_for_gang(item.spec, item.age_s, policy.aging):
            target = hold_target(fleet, item.spec, item.tenant, now)
            if target:
                fleet.hold(*target, holder=item.key)
"""

from broker.placement.engine import place, place_prepared, queue_candidates
from broker.placement.facts import ClusterFacts
from broker.placement.fairness import (
    Pending,
    hold_target,
    order_pending,
    priority,
    should_hold_for_gang,
)
from broker.placement.prepared_fleet import PreparedFleet
from broker.placement.packing import gang_capacity, pack_gang
from broker.placement.policy import (
    PRESETS,
    TERMS,
    Aging,
    GpuClass,
    Policy,
    PolicyError,
    QueueModel,
    TenantPolicy,
)
from broker.placement.policy_loader import load_policy, load_policy_file, policy_version
from broker.placement.results import RULES, Candidate, Exclusion, PlacementResult

__all__ = [
    "Aging",
    "Candidate",
    "ClusterFacts",
    "Exclusion",
    "GpuClass",
    "PRESETS",
    "Pending",
    "PlacementResult",
    "Policy",
    "PolicyError",
    "PreparedFleet",
    "QueueModel",
    "RULES",
    "TERMS",
    "TenantPolicy",
    "gang_capacity",
    "hold_target",
    "load_policy",
    "load_policy_file",
    "order_pending",
    "pack_gang",
    "place",
    "place_prepared",
    "queue_candidates",
    "policy_version",
    "priority",
    "should_hold_for_gang",
]
