"""The priority scenario of the replay: fleet priority classes drawn over the broker's jobs,
the policy with the broker owning preemption, minimum shares, and what preemption cost.

``--priority-mix production=0.1,scavenger=0.3`` gives about those shares of the jobs the
policy's fleet priority classes (the rest keep none, which is ``normal``), drawn per job from
the seed and its key, so every policy meets the same classes on the same jobs.  The policy
variant ``default+preempt`` is the policy file with the broker owning preemption on every
cluster (``preemption.owners``); ``--min-share TENANT=SHARE`` guarantees a replay tenant that
share of the fleet's GPUs (the policy's ``tenants.<replay-TENANT>.min_share``) in the
policy-file variants (``default``, ``default+burst<N>m``, ``default+preempt``), so with and
without preemption differ only in who may preempt.

``metrics.py`` scores it from the tracker's records like every figure: waits per class (to
the first start), and for the jobs preempted, how often, the GPU-hours their cut runs held,
and how much later they ended than they would have had they run at once (end - arrival -
run time).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

import yaml

from broker.replay.jobs import TENANT_PREFIX, ReplayJob
from broker.replay.local_jobs import draw
from broker.spec import PRIORITIES


PREEMPT_VARIANT = "default+preempt"


def parse_shares(raw: str, what: str) -> dict[str, float]:
    """``name=share,name=share`` -> {name: share}; shares in [0, 1] (their sum too, for a mix)."""
    out: dict[str, float] = {}
    for part in (p.strip() for p in raw.split(",") if p.strip()):
        name, sep, value = part.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"{what}: {part!r} is not NAME=SHARE")
        try:
            share = float(value)
        except ValueError:
            raise ValueError(f"{what}: {part!r}: the share is not a number") from None
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"{what}: {part!r}: a share from 0 to 1")
        if name.strip() in out:
            raise ValueError(f"{what}: {name.strip()!r} given twice")
        out[name.strip()] = share
    return out


def parse_priorities(raw: str, what: str) -> tuple[str, ...]:
    """``low,normal`` -> ("low", "normal"); each one of the spec's priorities."""
    names = tuple(p.strip() for p in raw.split(",") if p.strip())
    for name in names:
        if name not in PRIORITIES:
            raise ValueError(f"{what}: {name!r} is not a priority ({', '.join(PRIORITIES)})")
    return names


def check_mix(mix: Mapping[str, float], known: Sequence[str]) -> None:
    for name in mix:
        if name not in known:
            raise ValueError(f"priority_mix: {name!r} is not a priority class of the policy ({', '.join(known)})")
    if sum(mix.values()) > 1.0 + 1e-9:
        raise ValueError("priority_mix: the shares add up to more than 1")


def mark_priorities(jobs: Sequence[ReplayJob], mix: Mapping[str, float], seed: int) -> list[ReplayJob]:
    """The jobs with their priority class drawn by ``mix`` (per job, by seed and key)."""
    if not mix:
        return list(jobs)
    marked = []
    for job in jobs:
        pick, chosen = draw(seed, "priority", job.key), ""
        for name, share in mix.items():
            if pick < share:
                chosen = name
                break
            pick -= share
        marked.append(replace(job, priority_class=chosen))
    return marked


@dataclass(frozen=True)
class PriorityScenario:
    """The priority scenario of one replay (empty: none)."""

    mix: Mapping[str, float] = field(default_factory=dict)  # fleet priority class -> share of jobs
    min_shares: Mapping[str, float] = field(default_factory=dict)  # replay tenant -> guaranteed share
    preemptible: tuple[str, ...] = ()  # the priorities preemption may take (empty: the policy file's)

    def __bool__(self) -> bool:
        return bool(self.mix or self.min_shares or self.preemptible)


def scenario_policy_text(base: str, *, preempt: bool, scenario: PriorityScenario) -> str:
    """``base`` with the broker owning preemption everywhere (``preempt``), the scenario's
    preemptible priorities, and the replay tenants' minimum shares set (their other rules
    those of ``"*"``)."""
    policy = yaml.safe_load(base) or {}
    rule = dict(policy.get("preemption") or {})
    if preempt:
        rule["owners"] = {"*": "broker"}
    if scenario.preemptible:
        rule["preemptible"] = list(scenario.preemptible)
    policy["preemption"] = rule
    if scenario.min_shares:
        tenants = dict(policy.get("tenants") or {})
        for tenant, share in scenario.min_shares.items():
            tenants[f"{TENANT_PREFIX}{tenant}"] = {**(tenants.get("*") or {}), "min_share": share}
        policy["tenants"] = tenants
    return yaml.safe_dump(policy, sort_keys=False)
