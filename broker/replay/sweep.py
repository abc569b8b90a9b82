"""A sweep: several traces x arrival compressions x seeds, every policy in each cell,
summarised against the MultiKueue race (the baseline to beat) and the clairvoyant FIFO (a
baseline with known run times; not a bound).

Results go to a JSON file after every cell, so a long sweep can be stopped and resumed
(cells already in the file are skipped) and the summary re-rendered without rerunning.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from broker.replay.jobs import TimeOptions
from broker.replay.knobs import Knobs
from broker.replay.loop import ESTIMATOR_EXTRAS
from broker.replay.metrics import Metrics, mean, offered_load, whole_gpus
from broker.replay.runner import ReplayConfig, canonical, run_policies
from broker.replay.synth import SynthOptions
from broker.services.placing.replay_estimates import ReplayEstimateRun
from broker.placement.wait_estimator import ErrorSummary, EstimatorReport

RACE = "multikueue-race"
CLAIRVOYANT = "clairvoyant-fifo"
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
    knobs: Knobs | None = None  # ``default`` is the policy file with these (from replay_tune)
    # on-prem nodes scaled to each of these loads (target_load.py); None: the fleet as written
    target_loads: tuple[float | None, ...] = (None,)


def cell_key(trace: Path | str, compress: float, seed: int) -> str:
    return f"{Path(trace).name}|x{compress:g}|seed {seed}"


def metrics_row(m: Metrics) -> dict[str, Any]:
    return {
        "p50_wait_s": m.p50_wait_s,
        "p95_wait_s": m.p95_wait_s,
        "mean_wait_s": m.mean_wait_s,
        "p95_gang_wait_s": m.p95_gang_wait_s,
        "cloud_spend": m.cloud_spend,
        "failed_at_destination": m.failed_at_destination,
        "held_at_destination": m.held_at_destination,
        "never_placed": m.never_placed,
        "jobs": m.jobs,
        "started": m.started,
        "utilisation": m.utilisation,
        "worst_tenant_slowdown": m.worst_tenant_slowdown,
        "worst_tenant": m.worst_tenant,
        "extra": dict(m.extra),
        # the local users' jobs' own p95 (the report shows it per policy: no policy may win
        # by pushing them back) and the gangs' waits per shape, workers x GPUs: [n, mean, p95]
        "local_p95_wait_s": m.extra.get("local p95 wait s"),
        "by_gang_shape": {shape: list(v) for shape, v in m.by_gang_shape.items()},
        **({"estimator": m.estimator.to_dict()} if m.estimator else {}),
    }


def load_results(path: Path) -> dict[str, Any]:
    if path.exists():
        return json.loads(path.read_text(encoding="utf-8"))
    return {"cells": {}}


def merge_results(paths: Sequence[Path]) -> dict[str, Any]:
    """Several results files as one (runs of the same cell side by side; a policy run in
    two files keeps the earlier file's run)."""
    merged: dict[str, Any] = {"cells": {}}
    for path in paths:
        for key, cell in load_results(path)["cells"].items():
            mine = merged["cells"].setdefault(key, {**cell, "policies": {}, "seconds": {}})
            mine["policies"] = {**cell["policies"], **mine["policies"]}
            mine["seconds"] = {**cell.get("seconds", {}), **mine["seconds"]}
    return merged


def run_sweep(plan: SweepPlan, out: Path, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run every cell not yet in ``out`` (needs a database: the broker's presets)."""
    results = load_results(out)
    _same_knobs(results, plan)
    results["window"], results["queueing"] = plan.window, plan.queueing
    results["knobs"] = asdict(plan.knobs) if plan.knobs else None
    # seed outermost: after the first seed every trace and load has a row
    cells = [(t, c, s) for s in plan.seeds for c in plan.compressions for t in plan.traces]
    for trace, compress, seed in cells:
        key = cell_key(trace, compress, seed)
        done = results["cells"].get(key, {}).get("policies", {})
        todo = tuple(p for p in plan.policies if p not in done)
        if not todo:
            continue
        for policy in todo:  # one at a time: the file keeps every finished run
            _run_cell(plan, results, key, (trace, compress, seed), policy)
            out.write_text(json.dumps(results, indent=1, sort_keys=True), encoding="utf-8")
            if progress:
                progress(f"{key}: {policy} done")
    return results


def _same_knobs(results: dict[str, Any], plan: SweepPlan) -> None:
    """A results file's ``default`` rows were made with one set of knobs: resuming it
    with others would mix two policies under one name."""
    ran_default = any("default" in c.get("policies", {}) for c in results["cells"].values())
    wanted = asdict(plan.knobs) if plan.knobs else None
    had = results.get("knobs")
    if ran_default and (Knobs.from_dict(had) if had else None) != plan.knobs:
        raise ValueError(f"the results file's default runs used knobs {results.get('knobs')}, not {wanted}")


def _run_cell(plan: SweepPlan, results: dict[str, Any], key: str, cell: tuple[Path, float, int], policy: str) -> None:
    trace, compress, seed = cell
    config = ReplayConfig(
        trace=trace,
        fleet=plan.fleet,
        policies=(policy,),
        synth=SynthOptions(seed=seed),
        time=TimeOptions(time_compress=compress),
        window=plan.window,
        queueing=plan.queueing,
        knobs=plan.knobs,
    )
    report = run_policies(config)
    gpus = whole_gpus(report.fleet)
    load = offered_load(report.jobs)
    before = results["cells"].get(key, {})
    results["cells"][key] = {
        "trace": Path(trace).name,
        "compress": compress,
        "seed": seed,
        "jobs": len(report.jobs),
        "offered_load_gpus": load,
        "offered_load_share": load / gpus if gpus else 0.0,
        "policies": {**before.get("policies", {}), **{m.policy: metrics_row(m) for m in report.metrics}},
        "seconds": {**before.get("seconds", {}), **report.seconds},
    }


# -- the summary ------------------------------------------------------------------------


@dataclass(frozen=True)
class Summary:
    """One policy at one load (trace x compression), over the seeds."""

    trace: str
    compress: float
    policy: str
    load_share: float
    p95_wait_min: float  # mean over seeds
    wait_vs_race: float  # mean p95 / the race's mean p95
    spend: float
    spend_vs_race: float
    wait_over_clairvoyant_min: float
    failed: float
    held: float
    never_placed: float
    seeds: int
    race_p95_min: float = float("nan")

    @property
    def dominates_race(self) -> bool:
        return self.wait_vs_race <= WAIT_TARGET and self.spend_vs_race <= SPEND_TARGET


def _ratio(a: float, b: float) -> float:
    """a / b; 0 when both are 0 (then a <= k * b holds for every k: the target is met)."""
    if b > 0:
        return a / b
    return 0.0 if a <= 0 else float("inf")


def summarise(results: dict[str, Any]) -> list[Summary]:
    """Per trace x compression and policy: means over the seeds where the policy *and* the
    race ran (ratios are paired seed for seed, so a half-finished sweep stays fair)."""
    groups: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for cell in results["cells"].values():
        # results recorded before a rename name the policy by its old name
        policies = {canonical(name): figures for name, figures in cell["policies"].items()}
        groups.setdefault((cell["trace"], cell["compress"]), []).append({**cell, "policies": policies})
    out: list[Summary] = []
    for (trace, compress), cells in sorted(groups.items()):
        names = sorted({p for c in cells for p in c["policies"]})
        for name in names:
            paired = [c for c in cells if name in c["policies"] and RACE in c["policies"]]
            if paired:
                out.append(_summary(trace, compress, name, paired))
    return out


def _summary(trace: str, compress: float, name: str, cells: Sequence[dict[str, Any]]) -> Summary:
    def avg(policy: str, key: str) -> float:
        return mean([c["policies"][policy][key] for c in cells])

    wait, spend = avg(name, "p95_wait_s"), avg(name, "cloud_spend")
    with_fifo = [c for c in cells if CLAIRVOYANT in c["policies"]]
    fifo = mean([c["policies"][CLAIRVOYANT]["p95_wait_s"] for c in with_fifo]) if with_fifo else 0.0
    own = mean([c["policies"][name]["p95_wait_s"] for c in with_fifo]) if with_fifo else wait
    return Summary(
        trace=trace,
        compress=compress,
        policy=name,
        load_share=mean([c["offered_load_share"] for c in cells]),
        p95_wait_min=wait / 60,
        wait_vs_race=_ratio(wait, avg(RACE, "p95_wait_s")),
        spend=spend,
        spend_vs_race=_ratio(spend, avg(RACE, "cloud_spend")),
        wait_over_clairvoyant_min=(own - fifo) / 60 if with_fifo else float("nan"),
        failed=avg(name, "failed_at_destination"),
        held=avg(name, "held_at_destination"),
        never_placed=avg(name, "never_placed"),
        seeds=len(cells),
        race_p95_min=avg(RACE, "p95_wait_s") / 60,
    )


def markdown(summaries: Iterable[Summary]) -> str:
    lines = [
        "| trace | compress | load | policy | p95 wait (min) | p95 vs race | cloud spend "
        "| spend vs race | p95 over clairvoyant FIFO (min) | failed at dest | held at dest "
        "| never placed | seeds | dominates race |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]

    def times(x: float) -> str:
        return "n/a (race 0)" if x == float("inf") else f"{x:.2f}x"

    for s in summaries:
        wait_ratio = "0 = race's 0" if s.race_p95_min == 0 and s.p95_wait_min == 0 else times(s.wait_vs_race)
        over = (
            "-"
            if s.wait_over_clairvoyant_min != s.wait_over_clairvoyant_min
            else f"{s.wait_over_clairvoyant_min:+,.1f}"
        )
        lines.append(
            f"| {s.trace} | x{s.compress:g} | {s.load_share:.0%} | {s.policy} "
            f"| {s.p95_wait_min:,.1f} | {wait_ratio} | {s.spend:,.0f} "
            f"| {times(s.spend_vs_race)} | {over} | {s.failed:,.1f} "
            f"| {s.held:,.1f} | {s.never_placed:,.1f} | {s.seeds} "
            f"| {'yes' if s.dominates_race else 'no' if s.policy != RACE else '-'} |"
        )
    return "\n".join(lines)


def estimator_runs(results: dict[str, Any], half: str) -> list[ReplayEstimateRun]:
    """The wait-estimator figures of every broker preset run in a results file of the
    ``half`` windows (runs made before the file kept them per destination give the overall
    figures only)."""
    runs = []
    for cell in results["cells"].values():
        for policy, row in sorted(cell["policies"].items()):
            report = estimator_of(row)
            if report is not None:
                runs.append(
                    ReplayEstimateRun(
                        trace=cell["trace"],
                        half=half,
                        time_compress=cell["compress"],
                        seed=cell["seed"],
                        policy=policy,
                        jobs=cell["jobs"],
                        report=report,
                    )
                )
    return runs


def estimator_of(row: dict[str, Any]) -> EstimatorReport | None:
    if "estimator" in row:
        return EstimatorReport.from_dict(row["estimator"])
    extra = row.get("extra", {})
    if ESTIMATOR_EXTRAS["count"] not in extra:
        return None  # a baseline: it predicts nothing
    return EstimatorReport(overall=ErrorSummary(**{name: extra[key] for name, key in ESTIMATOR_EXTRAS.items()}))
