"""Local limits: the rules a cluster's own admission applies before any GPU is free.

Nodes say what could run; these say what the control plane will *admit*: a per-job cap
(Slurm QoS ``MaxTRESPerJob``, partition ``MaxNodes`` and ``MaxTime``) and group quotas
with their current use (Slurm ``GrpTRES``/``MaxJobs`` of a QoS or an association, a Kueue
ClusterQueue's nominal quota and borrowing limit per flavor, a Volcano queue's
capability).  Each backend reads them from its control plane and reports them with the
inventory; placement excludes a destination where a job can never be admitted and counts
quota headroom in the queue-wait estimate.

Beside the limits, the order a control plane takes its waiting jobs in where it is not
submission order: Slurm's fair share (``FairShare``), a priority the scheduler gives each
account's jobs from its past use.

Plain frozen dataclasses with a JSON round trip, because they are stored with the
inventory snapshot (``Cluster.local_limits``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping


@dataclass(frozen=True)
class JobCap:
    """The most one job may ask for.  ``pool`` empty: every pool of the cluster;
    ``scope`` empty: every job the broker sends, else only jobs of that account/queue."""

    source: str  # what sets it, in the control plane's words: "QoS gpu-small"
    pool: str = ""
    scope: str = ""
    max_gpus: int | None = None
    max_nodes: int | None = None
    max_time_s: float | None = None


@dataclass(frozen=True)
class GroupQuota:
    """A quota shared by many jobs: ``limit_gpus`` (nominal + borrowing) minus ``used_gpus``
    is what is left to admit.  ``max_jobs``: running jobs allowed at once."""

    source: str  # "ClusterQueue gpu-cq", "association research"
    pool: str = ""
    scope: str = ""
    limit_gpus: int | None = None  # None: no GPU limit (a job-count limit only)
    used_gpus: int = 0
    borrow_gpus: int = 0  # part of limit_gpus that is borrowed from a cohort
    max_jobs: int | None = None
    running_jobs: int = 0
    # Kueue: the ClusterQueue's withinClusterQueue preemption policy ("LowerPriority"), so a
    # simulator built from these limits preempts as the queue does; "" when it never does
    preemption: str = ""

    @property
    def headroom_gpus(self) -> int | None:
        if self.limit_gpus is None:
            return None
        return max(0, self.limit_gpus - self.used_gpus)

    @property
    def nominal_gpus(self) -> int | None:
        return None if self.limit_gpus is None else self.limit_gpus - self.borrow_gpus


@dataclass(frozen=True)
class FairShare:
    """Slurm's multifactor priority from fair share: an account's jobs wait behind those of
    accounts with a higher ``points`` (its fair-share factor, 0-1, times the configured
    ``PriorityWeightFairshare``), then in submission order."""

    source: str  # "fair share of account fs-heavy (PriorityWeightFairshare=100000)"
    scope: str  # the account
    factor: float
    points: float


@dataclass(frozen=True)
class LocalLimits:
    caps: tuple[JobCap, ...] = ()
    quotas: tuple[GroupQuota, ...] = ()
    shares: tuple[FairShare, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.caps or self.quotas or self.shares)

    def share_points(self) -> dict[str, float]:
        """Priority points per account (fair share); none when the cluster weighs none."""
        return {s.scope: s.points for s in self.shares}

    def caps_for(self, pool: str, scopes: Iterable[str] = ()) -> list[JobCap]:
        wanted = {"", *scopes}
        return [c for c in self.caps if _covers(c.pool, pool) and c.scope in wanted]

    def quotas_for(self, pool: str, scopes: Iterable[str] = ()) -> list[GroupQuota]:
        wanted = {"", *scopes}
        return [q for q in self.quotas if _covers(q.pool, pool) and q.scope in wanted]

    def to_json(self) -> dict[str, list[dict[str, Any]]]:
        out = {"caps": [_dump(c) for c in self.caps], "quotas": [_dump(q) for q in self.quotas]}
        if self.shares:  # absent when none: snapshots stored before fair share read the same
            out["shares"] = [_dump(s) for s in self.shares]
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> "LocalLimits":
        data = data or {}
        return cls(
            caps=tuple(JobCap(**c) for c in data.get("caps", ())),
            quotas=tuple(GroupQuota(**q) for q in data.get("quotas", ())),
            shares=tuple(FairShare(**f) for f in data.get("shares", ())),
        )


NO_LIMITS = LocalLimits()


def _covers(limit_pool: str, pool: str) -> bool:
    """A limit on "" covers every pool; on "gpu" the pool "gpu" and a Slurm partition's
    pools "gpu/a100", "gpu/h100"."""
    return not limit_pool or pool == limit_pool or pool.startswith(limit_pool + "/")


def _dump(obj: JobCap | GroupQuota | FairShare) -> dict[str, Any]:
    return {k: v for k, v in obj.__dict__.items() if v is not None and (v != "" or k == "source")}


def add_use(limits: LocalLimits, pool_gpus: Mapping[str, int], jobs: int = 0) -> LocalLimits:
    """The same limits with GPUs the report cannot show yet (promised by the broker since
    it was taken) counted as used, per pool."""
    if not pool_gpus and not jobs:
        return limits
    quotas = []
    for q in limits.quotas:
        extra = sum(gpus for pool, gpus in pool_gpus.items() if _covers(q.pool, pool))
        quotas.append(
            GroupQuota(
                **{
                    **q.__dict__,
                    "used_gpus": q.used_gpus + extra,
                    "running_jobs": q.running_jobs + (jobs if extra else 0),
                }
            )
        )
    return LocalLimits(caps=limits.caps, quotas=tuple(quotas), shares=limits.shares)
