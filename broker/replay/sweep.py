"""A sweep: several traces x arrival compressions x seeds, every policy in each cell,
summarised against the MultiKueue race (the baseline to beat) and the oracle (the bound).

Results go to a JSON file after every cell, so a long sweep can be stopped and resumed
(cells already in the file are skipped) and the summary re-rendered without rerunning.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from broker.replay.jobs import TimeOptions
from broker.replay.metrics import Metrics, mean, offered_load, whole_gpus
from broker.replay.runner import ReplayConfig, run_policies
from broker.replay.synth import SynthOptions

RACE = "multikueue-race"
ORACLE = "oracle"
# the target: p95 wait at most this share of the race's, cloud spend at most the race's
WAIT_TARGET, SPEND_TARGET = 0.7, 1.0


@dataclass(frozen=True)
class SweepPlan:
    traces: tuple[Path, ...]
    compressions: tuple[float, ...]
    seeds: tuple[int, ...]
    policies: tuple[str, ...]
    fleet: Path
    window: str = "second"
    queueing: str = "backfill"


def cell_key(trace: Path | str, compress: float, seed: int) -> str:
    return f"{Path(trace).name}|x{compress:g}|seed {seed}"


def metrics_row(m: Metrics) -> dict[str, Any]:
    return {"p95_wait_s": m.p95_wait_s, "mean_wait_s": m.mean_wait_s,
            "p95_gang_wait_s": m.p95_gang_wait_s, "cloud_spend": m.cloud_spend,
            "failed_at_destination": m.failed_at_destination,
            "held_at_destination": m.held_at_destination, "never_placed": m.never_placed,
            "jobs": m.jobs, "started": m.started, "utilisation": m.utilisation,
            "extra": dict(m.extra)}


def load_results(path: Path) -> dict[str, Any]:
    if path.exists():
        return json.loads(path.read_text(encoding="utf-8"))
    return {"cells": {}}


def run_sweep(plan: SweepPlan, out: Path,
              progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run every cell not yet in ``out`` (needs a database: the broker's presets)."""
    results = load_results(out)
    results["window"], results["queueing"] = plan.window, plan.queueing
    # seed outermost: after the first seed every trace and load has a row
    cells = [(t, c, s) for s in plan.seeds for c in plan.compressions for t in plan.traces]
    for trace, compress, seed in cells:
        key = cell_key(trace, compress, seed)
        done = results["cells"].get(key, {}).get("policies", {})
        todo = tuple(p for p in plan.policies if p not in done)
        if not todo:
            continue
        config = ReplayConfig(
            trace=trace, fleet=plan.fleet, policies=todo,
            synth=SynthOptions(seed=seed), time=TimeOptions(time_compress=compress),
            window=plan.window, queueing=plan.queueing)
        report = run_policies(config, progress=progress)
        gpus = whole_gpus(report.fleet)
        load = offered_load(report.jobs)
        results["cells"][key] = {
            "trace": Path(trace).name, "compress": compress, "seed": seed,
            "jobs": len(report.jobs), "offered_load_gpus": load,
            "offered_load_share": load / gpus if gpus else 0.0,
            "policies": {**done, **{m.policy: metrics_row(m) for m in report.metrics}},
            "seconds": {**results["cells"].get(key, {}).get("seconds", {}),
                        **report.seconds}}
        out.write_text(json.dumps(results, indent=1, sort_keys=True), encoding="utf-8")
        if progress:
            progress(f"{key}: done")
    return results


# -- the summary ------------------------------------------------------------------------

@dataclass(frozen=True)
class Summary:
    """One policy at one load (trace x compression), over the seeds."""

    trace: str
    compress: float
    policy: str
    load_share: float
    p95_wait_min: float        # mean over seeds
    wait_vs_race: float        # mean p95 / the race's mean p95
    spend: float
    spend_vs_race: float
    wait_over_oracle_min: float
    failed: float
    held: float
    never_placed: float
    seeds: int

    @property
    def dominates_race(self) -> bool:
        return self.wait_vs_race <= WAIT_TARGET and self.spend_vs_race <= SPEND_TARGET


def _ratio(a: float, b: float) -> float:
    if b > 0:
        return a / b
    return 1.0 if a <= 0 else float("inf")


def summarise(results: dict[str, Any]) -> list[Summary]:
    groups: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for cell in results["cells"].values():
        groups.setdefault((cell["trace"], cell["compress"]), []).append(cell)
    out: list[Summary] = []
    for (trace, compress), cells in sorted(groups.items()):
        names = [p for p in cells[0]["policies"] if all(p in c["policies"] for c in cells)]

        def avg(policy: str, field: str, group: Sequence[dict[str, Any]] = cells) -> float:
            return mean([c["policies"][policy][field] for c in group])
        race_wait = avg(RACE, "p95_wait_s") if RACE in names else 0.0
        race_spend = avg(RACE, "cloud_spend") if RACE in names else 0.0
        oracle = avg(ORACLE, "p95_wait_s") if ORACLE in names else 0.0
        for name in names:
            wait, spend = avg(name, "p95_wait_s"), avg(name, "cloud_spend")
            out.append(Summary(
                trace=trace, compress=compress, policy=name,
                load_share=mean([c["offered_load_share"] for c in cells]),
                p95_wait_min=wait / 60, wait_vs_race=_ratio(wait, race_wait),
                spend=spend, spend_vs_race=_ratio(spend, race_spend),
                wait_over_oracle_min=(wait - oracle) / 60,
                failed=avg(name, "failed_at_destination"),
                held=avg(name, "held_at_destination"), never_placed=avg(name, "never_placed"),
                seeds=len(cells)))
    return out


def markdown(summaries: Iterable[Summary]) -> str:
    lines = ["| trace | compress | load | policy | p95 wait (min) | p95 vs race | cloud spend "
             "| spend vs race | p95 over oracle (min) | failed at dest | held at dest "
             "| never placed | dominates race |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for s in summaries:
        lines.append(
            f"| {s.trace} | x{s.compress:g} | {s.load_share:.0%} | {s.policy} "
            f"| {s.p95_wait_min:,.1f} | {s.wait_vs_race:.2f}x | {s.spend:,.0f} "
            f"| {s.spend_vs_race:.2f}x | {s.wait_over_oracle_min:+,.1f} | {s.failed:,.1f} "
            f"| {s.held:,.1f} | {s.never_placed:,.1f} "
            f"| {'yes' if s.dominates_race else 'no' if s.policy != RACE else '-'} |")
    return "\n".join(lines)
