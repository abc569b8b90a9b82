"""What one side of a calibration saw: per job when it was submitted, started and ended,
and at each sampled instant why each waiting job waited (the broker's reason words)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Observed:
    name: str
    submitted_s: float
    started_s: float | None  # None: never started (cancelled while waiting)
    ended_s: float | None
    state: str  # as the side words it, lower case: completed, timeout, cancelled, ...
    backfilled: bool | None = None  # the real scheduler's own flag, where it keeps one
    preempted: int = 0  # times evicted for a higher-priority job and queued again
    nodes: str = ""  # where it ran (Slurm: sacct's NodeList; the simulator: its placement)


@dataclass
class Played:
    side: str  # "slurm 22.05.8", "simulator"
    jobs: dict[str, Observed] = field(default_factory=dict)
    # sampled instant (seconds from the start) -> job name -> reason, for waiting jobs only
    reasons: dict[float, dict[str, str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "side": self.side,
            "jobs": {n: vars(o) for n, o in sorted(self.jobs.items())},
            "reasons": {f"{t:.1f}": r for t, r in sorted(self.reasons.items())},
            "notes": self.notes,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Played":
        return cls(
            side=str(data.get("side", "")),
            jobs={str(n): Observed(**o) for n, o in (data.get("jobs") or {}).items()},
            reasons={float(t): dict(r) for t, r in (data.get("reasons") or {}).items()},
            notes=[str(n) for n in data.get("notes") or []],
        )
