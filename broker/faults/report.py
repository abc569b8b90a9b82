"""What a fault-harness run is asked to do, and what it reports (the table of faults
injected per crash point and of the invariant counts)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from broker.faults.invariants import CHECKS, INVARIANTS
from broker.faults.points import CRASH_POINTS


@dataclass
class HarnessConfig:
    workloads: int = 40
    faults: int = 60
    seed: int = 1
    slurm: bool = False
    points: tuple[str, ...] = ()  # empty: every point the mode supports
    max_steps: int = 0  # 0: derived from faults and workloads
    cancel_share: float = 0.2  # researchers cancel about this share of workloads
    log: Callable[[str], None] | None = None


@dataclass
class HarnessReport:
    config: HarnessConfig
    mode: str
    database: str
    faults_by_point: dict[str, int]
    counts: dict[str, int]
    examples: dict[str, list[str]]
    workloads: int
    states: dict[str, int]
    steps: int
    tasks_run: int
    tasks_lost: int
    elapsed_s: float
    virtual_s: float
    notes: list[str] = field(default_factory=list)
    faults_by_failpoint: dict[str, int] = field(default_factory=dict)  # the failpoints they fired at

    @property
    def faults(self) -> int:
        return sum(self.faults_by_point.values())

    @property
    def ok(self) -> bool:
        return all(v == 0 for v in self.counts.values()) and self.faults >= self.config.faults

    def table(self) -> str:
        c = self.config
        lines = [
            f"fault harness ({self.mode}, {self.database}): {self.workloads} workloads, "
            f"{self.faults} faults injected, seed {c.seed}, {self.steps} steps "
            f"({self.tasks_run} tasks run, {self.tasks_lost} lost), {self.elapsed_s:.0f} s wall, "
            f"{self.virtual_s / 3600:.1f} h broker time",
            "",
        ]
        lines.append(f"| {'crash point':<34} | {'injected':>8} |")
        lines.append(f"|{'-' * 36}|{'-' * 10}:|")
        for point in CRASH_POINTS:
            if point.name in self.faults_by_point:
                lines.append(f"| {point.name:<34} | {self.faults_by_point[point.name]:>8} |")
        lines.append(f"| {'**total**':<34} | {self.faults:>8} |")
        lines.append("")
        if self.faults_by_failpoint:
            at = ", ".join(f"{k} {v}" for k, v in sorted(self.faults_by_failpoint.items()))
            lines.extend([f"fired at the services' failpoints: {at}", ""])
        lines.append(f"| {'invariant':<62} | {'count':>5} |")
        lines.append(f"|{'-' * 64}|{'-' * 6}:|")
        for key, label in INVARIANTS + CHECKS:
            lines.append(f"| {label:<62} | {self.counts.get(key, 0):>5} |")
        lines.append("")
        states = ", ".join(f"{k} {v}" for k, v in sorted(self.states.items()))
        lines.append(f"workloads at the end: {states}")
        lines.extend(self.notes)
        bad = [k for k, v in self.counts.items() if v]
        for key in bad:
            lines.append(f"\n{key}: examples")
            lines.extend(f"  {e}" for e in self.examples.get(key, [])[:10])
        if self.faults < c.faults:
            lines.append(f"\nonly {self.faults} of the {c.faults} faults asked for were injected")
        lines.append("RESULT: " + ("PASS (every count is zero)" if self.ok else "FAIL"))
        return "\n".join(lines)
