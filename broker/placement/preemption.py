"""Who owns preemption on each cluster, and which work the broker may preempt there.

The policy (key ``preemption``) names one owner per cluster (``"*"`` for every cluster not
named): ``local``, the default, leaves it to the control plane (Kueue's ClusterQueue
preemption, Slurm's QoS preemption; the broker only follows what it did), ``broker`` makes
the broker the one that preempts there.  Where the broker owns it, a workload waiting for
capacity longer than ``after_s`` may withdraw running or queued work at a lower priority
whose priority is in ``preemptible``, and only work the broker placed, never a local job,
and never a workload already preempted ``max_per_workload`` times (it runs on to its end).
A workload whose tenant holds less of its GPU class than the policy's ``min_share`` of it
guarantees (the job included) may also reclaim: it may take preemptible work at its own
priority or below from tenants holding more than their own guarantee, never so much that
one of them falls below it.

The victims are taken lowest priority first and, within one priority, the most recently
started first (the least work lost), until their GPUs with the cluster's idle ones make room
for the whole job; when all it may take is not enough, it takes nothing.

Pure: the service reads the fleet and the workloads, and cancels.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Mapping, Sequence

from broker.spec import PRIORITIES

OWNERS = ("local", "broker")


def rank(priority: str) -> int:
    """low < normal < high."""
    return PRIORITIES.index(priority) if priority in PRIORITIES else 0


@dataclass(frozen=True)
class Preemption:
    owners: Mapping[str, str] = field(default_factory=lambda: {"*": "local"})
    after_s: float = 600.0
    preemptible: tuple[str, ...] = ("low",)
    # a workload already preempted this often (by anyone) is not preempted by the broker
    # again: the priority scenario's replay preempted scavenger jobs 22 times each on average
    max_per_workload: int = 2

    def owner(self, cluster: str) -> str:
        return self.owners.get(cluster) or self.owners.get("*") or "local"

    @property
    def broker_owns_any(self) -> bool:
        return "broker" in self.owners.values()


@dataclass(frozen=True)
class Running:
    """Work the broker placed on one cluster, as a possible victim."""

    key: int
    priority: str
    gpus: int
    since: datetime  # started, or queued there when it has not started
    tenant: str = ""


def victims(
    *,
    rule: Preemption,
    priority: str,
    needed_gpus: int,
    idle_gpus: int,
    running: Sequence[Running],
    reclaim: Mapping[str, int] | None = None,
) -> list[Running] | None:
    """The work to preempt so that ``needed_gpus`` fit beside ``idle_gpus``: [] when they fit
    already, else lowest priority and latest started first until they do, or None when all
    it may take is too little (then nothing is preempted: preempting for a job that still
    does not fit loses work for nothing).  ``reclaim``: the waiting tenant is under its
    minimum share; each other tenant's GPUs above its own guarantee."""
    if idle_gpus >= needed_gpus:
        return []
    above = dict(reclaim or {})
    ordered = sorted(
        (r for r in running if r.priority in rule.preemptible and rank(r.priority) <= rank(priority)),
        key=lambda r: (rank(r.priority), -r.since.timestamp(), r.key),
    )
    chosen: list[Running] = []
    room = idle_gpus
    for r in ordered:
        if rank(r.priority) == rank(priority):  # a lower priority goes by priority alone
            if reclaim is None or above.get(r.tenant, 0) < r.gpus:
                continue  # the same only by reclaim, and never below the victim's guarantee
            above[r.tenant] -= r.gpus
        chosen.append(r)
        room += r.gpus
        if room >= needed_gpus:
            return chosen
    return None
