"""Tuning the default preset's knobs on the FIRST half of each trace only.

The report (``replay_sweep``) runs on the second halves; nothing here can read them:
the half is fixed to ``TUNING_HALF`` and is not a parameter.  Each knob setting is the
policy in force with these keys overlaid:

* ``burst.min_onprem_wait_s``: the cloud only when the predicted on-prem wait passes it;
* ``burst.reassess_share``: the share of on-prem TCO past which the threshold doubles;
* ``weights.queue_wait_s``: the weight of the predicted queue wait in the score;
* ``aging.queue_weight_per_hour``: how much that weight grows per hour a job has waited
  at the broker (under load it soon outweighs the preset's own weights);
* ``policy_hold_withdraw_s``: how long a job may sit held at its destination by a local
  policy reason (quota, QoS) before it is withdrawn and placed again (0: never).

(The tenant's monthly cloud budget is a row, not a policy key; the replay's tenants have
none, so it is not on the grid.)  A setting is scored on every first-half cell (trace x
compression x seed) against the MultiKueue race of the same cell: first the number of
cells where it meets the target (p95 wait <= 0.7x and cloud spend <= 1.0x the race's),
then the mean over cells of its worse ratio to the target (lower is better).  The
chosen knobs go to a JSON file that the report reads.  Every run is kept in a results
file, with the job ids each trace showed the tuner, so an interrupted tuning resumes
and anyone can check that no second-half job was seen.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from broker.fleet_file import load_fleet
from broker.replay.jobs import TimeOptions
from broker.replay.knobs import Knobs
from broker.replay.runner import ReplayConfig, load_jobs, run_one
from broker.replay.sweep import RACE, SPEND_TARGET, WAIT_TARGET, cell_key, metrics_row
from broker.replay.synth import SynthOptions

TUNING_HALF = "first"  # never "second": that half is the report's
_RATIO_CAP = 100.0  # a ratio to a race that waited 0 s


def grid(
    burst_minutes: Sequence[float],
    reassess: Sequence[float | None],
    weights: Sequence[float | None],
    aging: Sequence[float | None] = (None,),
    hold_minutes: Sequence[float | None] = (None,),
) -> list[Knobs]:
    holds = [None if h is None else h * 60.0 for h in hold_minutes]
    axes = itertools.product(burst_minutes, reassess, weights, aging, holds)
    return [Knobs(m * 60.0, r, w, a, h) for m, r, w, a, h in axes]


@dataclass(frozen=True)
class TunePlan:
    traces: tuple[Path, ...]
    compressions: tuple[float, ...]
    seeds: tuple[int, ...]
    grid: tuple[Knobs, ...]
    fleet: Path
    queueing: str = "backfill"
    max_jobs: int | None = None  # only the first N jobs of each first half (CPU time)


@dataclass
class Score:
    knobs: Knobs
    met: int = 0  # cells where the target is met
    badness: list[float] = field(default_factory=list)  # worse ratio to the target, per cell

    @property
    def key(self) -> tuple[int, float]:
        return (-self.met, sum(self.badness) / len(self.badness) if self.badness else float("inf"))


def _ratio(a: float, b: float) -> float:
    if b > 0:
        return a / b
    return 0.0 if a <= 0 else _RATIO_CAP  # both 0: a <= k * b holds, the target is met


def score(results: dict[str, Any], knobs: Knobs) -> Score:
    out = Score(knobs)
    for cell in results["cells"].values():
        runs = cell["policies"]
        mine, race = runs.get(knobs.label), runs.get(RACE)
        if mine is None or race is None:
            continue
        wait = _ratio(mine["p95_wait_s"], race["p95_wait_s"])
        spend = _ratio(mine["cloud_spend"], race["cloud_spend"])
        out.met += wait <= WAIT_TARGET and spend <= SPEND_TARGET
        out.badness.append(min(_RATIO_CAP, max(wait / WAIT_TARGET, spend / SPEND_TARGET)))
    return out


def load(path: Path) -> dict[str, Any]:
    if path.exists():
        return json.loads(path.read_text(encoding="utf-8"))
    return {"half": TUNING_HALF, "cells": {}, "jobs_seen": {}}


def tune(plan: TunePlan, results_path: Path, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the race and every knob setting on the first halves (cells already in the
    results file are kept); needs a database."""
    results = load(results_path)
    fleet = load_fleet(plan.fleet)
    for seed, compress, trace in itertools.product(plan.seeds, plan.compressions, plan.traces):
        config = ReplayConfig(
            trace=trace,
            fleet=plan.fleet,
            policies=(),
            synth=SynthOptions(seed=seed),
            time=TimeOptions(time_compress=compress),
            window=TUNING_HALF,
            queueing=plan.queueing,
        )
        jobs = load_jobs(config)[1][: plan.max_jobs]
        seen = results["jobs_seen"].setdefault(trace.name, [])
        seen.extend(sorted({j.key for j in jobs} - set(seen)))
        cell = results["cells"].setdefault(
            cell_key(trace, compress, seed),
            {"trace": trace.name, "compress": compress, "seed": seed, "half": TUNING_HALF, "policies": {}},
        )
        cell["jobs_replayed"] = len(jobs)
        for name, knobs in [(RACE, None), *((k.label, k) for k in plan.grid)]:
            if name in cell["policies"]:
                continue
            metrics = run_one(
                name if knobs is None else "default", jobs, fleet, seed, queueing=plan.queueing, knobs=knobs
            )
            cell["policies"][name] = metrics_row(metrics)
            results_path.write_text(json.dumps(results, indent=1, sort_keys=True), encoding="utf-8")
            if progress:
                progress(f"tune {cell_key(trace, compress, seed)}: {name} done")
    return results


def merge(paths: Sequence[Path]) -> dict[str, Any]:
    """Tuning results of several runs (say one per trace, run side by side) as one."""
    merged: dict[str, Any] = load(Path("/nonexistent"))
    for path in paths:
        part = load(path)
        for key, cell in part["cells"].items():
            mine = merged["cells"].setdefault(key, {**cell, "policies": {}})
            mine["policies"] = {**cell["policies"], **mine["policies"]}
        for trace, keys in part["jobs_seen"].items():
            seen = merged["jobs_seen"].setdefault(trace, [])
            seen.extend(sorted(set(keys) - set(seen)))
    return merged


def choose(results: dict[str, Any], candidates: Sequence[Knobs]) -> list[Score]:
    """The candidates, best first."""
    return sorted((score(results, k) for k in candidates), key=lambda s: s.key)


def write_choice(path: Path, results: dict[str, Any], ranked: Sequence[Score]) -> Knobs:
    best = ranked[0]
    doc = {
        "knobs": asdict(best.knobs),
        "tuned_on": [
            {k: cell.get(k) for k in ("trace", "half", "compress", "seed", "jobs_replayed")}
            for _key, cell in sorted(results["cells"].items())
        ],
        "ranking": [
            {"label": s.knobs.label, "target_met_cells": s.met, "mean_worse_ratio": round(s.key[1], 3)} for s in ranked
        ],
    }
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return best.knobs
