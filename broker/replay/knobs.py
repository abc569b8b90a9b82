"""The default preset's tunable knobs, and the file a tuning writes them to.

``replay_tune`` chooses them on the first halves of the traces; the report
(``replay_sweep``) reads the file and replays ``default`` as the policy in force with
these keys overlaid.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

KNOBS_FILE = Path(__file__).with_name("tuned_default.json")


@dataclass(frozen=True)
class Knobs:
    """The default preset's settings the tuner may change (None: as in the policy file)."""

    burst_min_onprem_wait_s: float = 0.0
    reassess_share: float | None = None
    queue_wait_weight: float | None = None
    # aging.queue_weight_per_hour: how fast a waiting job's queue-wait weight grows
    aging_queue_weight_per_hour: float | None = None
    # policy_hold_withdraw_s: a job held at its destination by a local policy reason this
    # long is withdrawn and placed again (0: never)
    policy_hold_withdraw_s: float | None = None
    # aging.queue_after_s: how long a job that fits nowhere now waits at the broker before it
    # queues at the destination predicted to start it first
    aging_queue_after_s: float | None = None
    # aging.move_past_queue_after_s: after this long in its destination's queue, a job may
    # move to a cluster with jobs queued that reports room for it now
    aging_move_past_queue_after_s: float | None = None
    # aging.max_moves: how often a queued job may move
    aging_max_moves: int | None = None

    @property
    def label(self) -> str:
        parts = [f"burst{self.burst_min_onprem_wait_s / 60:g}m"]
        if self.reassess_share is not None:
            parts.append(f"reassess{self.reassess_share:g}")
        if self.queue_wait_weight is not None:
            parts.append(f"wait{self.queue_wait_weight:g}")
        if self.aging_queue_weight_per_hour is not None:
            parts.append(f"age{self.aging_queue_weight_per_hour:g}")
        if self.policy_hold_withdraw_s is not None:
            parts.append(f"hold{self.policy_hold_withdraw_s / 60:g}m")
        if self.aging_queue_after_s is not None:
            parts.append(f"queue{self.aging_queue_after_s / 60:g}m")
        if self.aging_move_past_queue_after_s is not None:
            parts.append(f"move{self.aging_move_past_queue_after_s / 60:g}m")
        if self.aging_max_moves is not None:
            parts.append(f"moves{self.aging_max_moves}")
        return "default[" + ",".join(parts) + "]"

    def policy_text(self, base: str) -> str:
        """``base`` (a policy file's text) with these knobs set."""
        policy = yaml.safe_load(base) or {}
        burst = dict(policy.get("burst") or {})
        burst["min_onprem_wait_s"] = self.burst_min_onprem_wait_s
        if self.reassess_share is not None:
            burst["reassess_share"] = self.reassess_share
        policy["burst"] = burst
        if self.queue_wait_weight is not None:
            policy["weights"] = {**(policy.get("weights") or {}), "queue_wait_s": self.queue_wait_weight}
        aging = {
            key: value
            for key, value in (
                ("queue_weight_per_hour", self.aging_queue_weight_per_hour),
                ("queue_after_s", self.aging_queue_after_s),
                ("move_past_queue_after_s", self.aging_move_past_queue_after_s),
                ("max_moves", self.aging_max_moves),
            )
            if value is not None
        }
        if aging:
            policy["aging"] = {**(policy.get("aging") or {}), **aging}
        if self.policy_hold_withdraw_s is not None:
            policy["policy_hold_withdraw_s"] = self.policy_hold_withdraw_s
        return yaml.safe_dump(policy, sort_keys=False)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "Knobs":
        unknown = set(raw) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"knobs: unknown {', '.join(sorted(unknown))}")
        return cls(**raw)


def read_knobs(path: Path) -> Knobs:
    """The knobs a tuning chose (its file's ``knobs`` entry)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return Knobs.from_dict(raw["knobs"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"knobs file {path}: {exc}") from None
