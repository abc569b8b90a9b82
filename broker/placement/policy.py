"""Placement policy: who may use what, and how candidates are weighed.

A policy is plain data (frozen dataclasses) so the placement library stays pure; the YAML
loader lives in ``policy_loader`` and produces the same objects.  The policy's version (a
hash of its text) goes into every decision's audit record.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping

from broker.placement.budgets import Budget
from broker.placement.burst import Burst
from broker.placement.facts import region_matches
from broker.placement.off_peak import OffPeak
from broker.placement.preemption import Preemption
from broker.placement.priority_classes import PriorityClass
from broker.spec import PRIORITIES

# The ranking terms, named with their units; weights and breakdowns use these keys.
TERMS = ("queue_wait_s", "startup_s", "gpu_cost", "transfer_cost", "location", "data_remote")

# Presets are weight sets.  Terms are normalised to 0..1 across the candidates before
# weighting, so a weight says how much that term matters relative to the others.
PRESETS: dict[str, dict[str, float]] = {
    "on-prem-first": {
        "queue_wait_s": 1.0,
        "startup_s": 0.5,
        "gpu_cost": 1.0,
        "transfer_cost": 0.5,
        "location": 4.0,
        "data_remote": 0.5,
    },
    "cloud-first": {
        "queue_wait_s": 1.0,
        "startup_s": 0.5,
        "gpu_cost": 1.0,
        "transfer_cost": 0.5,
        "location": 4.0,
        "data_remote": 0.5,
    },
    "cost": {
        "queue_wait_s": 0.5,
        "startup_s": 0.25,
        "gpu_cost": 4.0,
        "transfer_cost": 4.0,
        "location": 0.0,
        "data_remote": 0.0,
    },
    "fastest": {
        "queue_wait_s": 4.0,
        "startup_s": 4.0,
        "gpu_cost": 0.5,
        "transfer_cost": 0.25,
        "location": 0.0,
        "data_remote": 0.0,
    },
    "data-local": {
        "queue_wait_s": 1.0,
        "startup_s": 2.0,
        "gpu_cost": 1.0,
        "transfer_cost": 2.0,
        "location": 0.0,
        "data_remote": 4.0,
    },
}
# Which location the "location" term favours under each preset (None: the term is 0).
PRESET_LOCATION: dict[str, str | None] = {
    "on-prem-first": "onprem",
    "cloud-first": "cloud",
    "cost": None,
    "fastest": None,
    "data-local": None,
}

_NON_ALNUM = re.compile(r"[^a-z0-9]")


class PolicyError(ValueError):
    """A policy file is invalid; ``key`` is the dotted path of the offending key."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(f"policy key '{key}': {message}")


def model_key(model: str) -> str:
    """Normalise a GPU model name so 'NVIDIA A100-SXM4-80GB' == 'a100 sxm4 80gb'."""
    key = _NON_ALNUM.sub("", model.lower())
    return key[6:] if key.startswith("nvidia") else key


@dataclass(frozen=True)
class GpuClass:
    name: str
    models: tuple[str, ...]
    min_memory_gb: int = 0
    model_keys: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "model_keys", frozenset(model_key(m) for m in self.models))

    def includes(self, gpu_model: str, gpu_memory_gb: int) -> bool:
        return model_key(gpu_model) in self.model_keys and gpu_memory_gb >= self.min_memory_gb


@dataclass(frozen=True)
class TenantPolicy:
    name: str
    gpu_classes: tuple[str, ...] = ("*",)
    regions: tuple[str, ...] = ("*",)
    min_share: float = 0.0  # fraction of the fleet's GPUs this tenant is guaranteed
    burst_gpus: int = 0  # GPUs it may borrow above its global quota (reservation layer)
    priorities: tuple[str, ...] = PRIORITIES  # the priorities its members may submit at
    priority_classes: tuple[str, ...] = ("*",)  # the fleet priority classes they may submit at

    def allows_priority_class(self, name: str) -> bool:
        return "*" in self.priority_classes or name in self.priority_classes

    def allows_class(self, gpu_class: str) -> bool:
        return "*" in self.gpu_classes or gpu_class in self.gpu_classes

    def allows_any_class(self, gpu_classes: tuple[str, ...]) -> bool:
        return "*" in self.gpu_classes or any(c in self.gpu_classes for c in gpu_classes)

    def allows_region(self, region: str) -> bool:
        return region_matches(region, self.regions)


DENY_ALL = TenantPolicy(name="", gpu_classes=(), regions=())


@dataclass(frozen=True)
class QueueModel:
    """How queue wait is estimated from a cluster's QueueStats."""

    assumed_job_hours: float = 1.0  # prior: GPU-hours per pending GPU, until starts are seen
    max_wait_s: float = 7 * 86400.0  # cap, also used when throughput is unknown (0)
    half_life_s: float = 6 * 3600.0  # learned waits: how fast old observations fade


@dataclass(frozen=True)
class Aging:
    """Starvation guards: waiting raises priority, big gangs may hold capacity."""

    boost_per_hour: float = 1.0  # priority points per hour waited
    max_boost: float = 10.0
    big_gang_gpus: int = 16  # gangs this large age faster and may hold capacity
    hold_after_s: float = 3600.0  # a big gang waiting this long may hold a pool
    min_share_bonus: float = 2.0  # priority points for a tenant under its min share
    queue_weight_per_hour: float = 0.5  # waited hours raise the queue-wait weight by this
    # a job that fits nowhere now waits at the broker this long, then queues at the
    # destination predicted to start it first (its local scheduler keeps its place and, on
    # Slurm, reserves nodes for it); None: it waits at the broker until it fits somewhere
    queue_after_s: float | None = 120.0
    # a job waiting for capacity in one destination's queue moves when another could start
    # it now (broker.services.placing.moving)
    move_queued: bool = True
    # ...to a cluster with nothing queued; once it has waited at its destination this long,
    # also to one with jobs queued that reports room for it now (None: never)
    move_past_queue_after_s: float | None = None
    # ...at most this many times: each move gives up a place in a queue, and a report that
    # showed room the job then did not get (a local user was quicker) must not make it wander
    max_moves: int = 2


@dataclass(frozen=True)
class MultiKueueDispatch:
    """The broker as MultiKueue's dispatcher: how long a nominated worker has to admit
    before the nomination goes to the next choice, and how many workers one lists."""

    admission_timeout_s: float = 300.0
    nominate: int = 1  # 1: one worker at a time; more: an ordered short list


@dataclass(frozen=True)
class Policy:
    gpu_classes: Mapping[str, GpuClass] = field(default_factory=dict)
    tenants: Mapping[str, TenantPolicy] = field(default_factory=lambda: {"*": TenantPolicy("*")})
    preset: str = "on-prem-first"
    weight_overrides: Mapping[str, float] = field(default_factory=dict)
    staleness_limit_s: float = 300.0
    reservation_ttl_s: float = 600.0
    queue: QueueModel = field(default_factory=QueueModel)
    aging: Aging = field(default_factory=Aging)
    multikueue: MultiKueueDispatch = field(default_factory=MultiKueueDispatch)
    burst: Burst = field(default_factory=Burst)  # spend-aware bursting (placement.burst)
    off_peak: OffPeak = field(default_factory=OffPeak)  # off-peak windows (placement.off_peak)
    budgets: tuple[Budget, ...] = ()  # GPU-hour budgets over time (placement.budgets)
    priority_classes: Mapping[str, PriorityClass] = field(default_factory=dict)  # (placement.priority_classes)
    preemption: Preemption = field(default_factory=Preemption)  # its owner per cluster (placement.preemption)
    prefer_location: str | None = None  # None: the preset's location
    # clusters that add nodes on demand: a job too large for them today is not "never"
    autoscaling: tuple[str, ...] = ()
    # a job held at its destination by a local policy reason (QoS, association, quota)
    # this long is withdrawn and placed elsewhere; 0: never
    policy_hold_withdraw_s: float = 1800.0
    version: str = ""

    def __post_init__(self) -> None:
        if self.preset not in PRESETS:
            raise PolicyError("preset", f"unknown preset {self.preset!r}; choose one of {', '.join(PRESETS)}")
        for term in self.weight_overrides:
            if term not in TERMS:
                raise PolicyError(f"weights.{term}", f"unknown term; known: {', '.join(TERMS)}")

    @property
    def weights(self) -> dict[str, float]:
        merged = dict(PRESETS[self.preset])
        merged.update(self.weight_overrides)
        return merged

    @property
    def preferred_location(self) -> str | None:
        if self.prefer_location is not None:
            return self.prefer_location or None
        return PRESET_LOCATION[self.preset]

    def tenant(self, name: str) -> TenantPolicy:
        """The tenant's rules, the '*' entry when it has none, else deny everything."""
        return self.tenants.get(name) or self.tenants.get("*") or DENY_ALL

    def budgets_for(self, *, tenant: str, project: str, gpu_class: str) -> tuple[Budget, ...]:
        """The budgets a workload of this tenant, project and class counts against."""
        return tuple(b for b in self.budgets if b.covers(tenant=tenant, project=project, gpu_class=gpu_class))

    def classes_of(self, gpu_model: str, gpu_memory_gb: int) -> tuple[str, ...]:
        return tuple(sorted(c.name for c in self.gpu_classes.values() if c.includes(gpu_model, gpu_memory_gb)))
