"""A sweep's results as one JSON file per cell (trace, half, compression, seed, policy).

One file per cell makes the sweep resumable at the finest grain (a cell whose file exists
is not run again, so a sweep stopped after hours loses at most the run in progress) and
lets several processes share a sweep without merging files. Each file says what made it:
the commit and whether the tree was clean, the command's arguments, the seed, and the CPU
seconds the run took, so a table regenerated later can say which code it rests on and
what it cost.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

from broker.replay.jobs import TimeOptions
from broker.replay.knobs import Knobs
from broker.replay.lower_bound import replay_wait_bound_s
from broker.replay.metrics import offered_load, whole_gpus
from broker.replay.runner import LOWER_BOUND, ReplayConfig, ReplayReport, canonical, run_policies
from broker.replay.sweep import SweepPlan, estimator_of, metrics_row
from broker.replay.synth import SynthOptions
from broker.services.placing.replay_estimates import ReplayEstimateRun

FORMAT = 1
FIELDS = frozenset(
    {
        "format", "trace", "half", "compress", "seed", "policy", "fleet", "queueing", "local_share", "knobs",
        "commit", "clean", "args", "jobs", "offered_load_gpus", "offered_load_share", "metrics", "cpu_s",
        "wall_s", "finished_at", "target_load", "scaled_fleet",
    }
)  # fmt: skip
# fields older cell files lack, with the value that meant then
OPTIONAL = {"target_load": None, "scaled_fleet": None}
Runner = Callable[[ReplayConfig], ReplayReport]


class CellError(ValueError):
    """A cell file that cannot be read as one (names the file and the field)."""


@dataclass(frozen=True)
class Cell:
    trace: Path
    half: str
    compress: float
    seed: int
    policy: str
    target_load: float | None = None

    @property
    def file_name(self) -> str:
        policy = re.sub(r"[^A-Za-z0-9.+-]", "_", self.policy)
        load = f"__load{self.target_load:g}" if self.target_load is not None else ""
        return f"{self.trace.stem}__{self.half}__x{self.compress:g}{load}__seed{self.seed}__{policy}.json"


def plan_cells(plan: SweepPlan) -> list[Cell]:
    """Seed outermost: after the first seed every trace and load has a row."""
    return [
        Cell(trace, plan.window, compress, seed, policy, load)
        for seed in plan.seeds
        for compress in plan.compressions
        for load in plan.target_loads
        for trace in plan.traces
        for policy in plan.policies
    ]


def git_state(root: Path | None = None, results: Path | None = None) -> dict[str, Any]:
    """The commit checked out and whether the tree was clean (None for either when git
    cannot say: a copy of the code outside a repository).  ``results``: the sweep's own
    folder, left out of "clean" (its files are what the sweep writes, not code; a second
    process sharing it would otherwise find the tree unclean)."""
    where = root or Path(__file__).resolve().parents[2]
    spec = []
    if results is not None and results.resolve().is_relative_to(where.resolve()):
        spec = ["--", ".", f":(exclude){results.resolve().relative_to(where.resolve()).as_posix()}"]

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=where, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout if done.returncode == 0 else None

    head, status = git("rev-parse", "HEAD"), git("status", "--porcelain", *spec)
    return {"commit": head.strip() if head else None, "clean": None if status is None else status.strip() == ""}


def run_cells(
    plan: SweepPlan,
    out_dir: Path,
    args: dict[str, Any],
    progress: Callable[[str], object] | None = None,
    runner: Runner = run_policies,
) -> list[Path]:
    """Run every cell of ``plan`` whose file is not in ``out_dir`` yet; the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    code = git_state(results=out_dir)
    written = []
    for cell in plan_cells(plan):
        path = out_dir / cell.file_name
        if path.exists():
            _same_knobs(path, cell, plan.knobs)
            continue
        record = run_cell(plan, cell, runner)
        write_cell(path, {**record, **code, "args": args})
        written.append(path)
        if progress:
            progress(f"{path.name}: {record['cpu_s']:.1f} CPU s")
    return written


def run_cell(plan: SweepPlan, cell: Cell, runner: Runner = run_policies) -> dict[str, Any]:
    """One policy on one trace, half, load and seed, with the CPU time it took."""
    config = ReplayConfig(
        trace=cell.trace,
        fleet=plan.fleet,
        policies=(cell.policy,),
        synth=SynthOptions(seed=cell.seed),
        time=TimeOptions(time_compress=cell.compress),
        window=cell.half,
        queueing=plan.queueing,
        knobs=plan.knobs,
        target_load=cell.target_load,
    )
    cpu, wall = time.process_time(), time.perf_counter()
    report = runner(config)
    if cell.policy == LOWER_BOUND:
        metrics = bound_row(report)
    else:
        [run] = report.metrics
        metrics = metrics_row(run)
    cpu_s, wall_s = time.process_time() - cpu, time.perf_counter() - wall
    gpus, load = whole_gpus(report.fleet), offered_load(report.jobs)
    return {
        "format": FORMAT,
        "trace": cell.trace.name,
        "half": cell.half,
        "compress": cell.compress,
        "seed": cell.seed,
        "policy": cell.policy,
        "fleet": plan.fleet.name,
        "queueing": plan.queueing,
        "local_share": config.local_share,
        "knobs": asdict(plan.knobs) if plan.knobs and cell.policy == "default" else None,
        "jobs": len(report.jobs),
        "offered_load_gpus": load,
        "offered_load_share": load / gpus if gpus else 0.0,
        "target_load": cell.target_load,
        "scaled_fleet": report.scaling.describe() if report.scaling is not None else None,
        "metrics": metrics,
        "cpu_s": cpu_s,
        "wall_s": wall_s,
        "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def bound_row(report: ReplayReport) -> dict[str, Any]:
    """The lower bound's metrics: the mean wait only (no other figure has a bound here), over
    the jobs the policies are scored on."""
    scored = sum(1 for j in report.jobs if not j.local)
    return {"mean_wait_s": replay_wait_bound_s(report.jobs, report.fleet, report.classes), "jobs": scored}


def _same_knobs(path: Path, cell: Cell, knobs: Knobs | None) -> None:
    """A ``default`` cell made with other knobs is another policy under the same name:
    refused rather than kept as if it were this sweep's."""
    if cell.policy != "default":
        return
    had = read_cell(path)["knobs"]
    if (Knobs.from_dict(had) if had else None) != knobs:
        wanted = asdict(knobs) if knobs else None
        raise CellError(f"{path}: knobs: made with {had}, not {wanted}; move the file away to rerun the cell")


def write_cell(path: Path, record: dict[str, Any]) -> None:
    """Written whole or not at all: a sweep killed mid-write leaves no half file that
    would count as done."""
    unknown = sorted(set(record) - FIELDS)
    if unknown:
        raise CellError(f"{path}: unknown field(s) {', '.join(unknown)}")
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(partial, path)


def read_cell(path: Path) -> dict[str, Any]:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CellError(f"{path}: not a readable JSON cell file ({exc})") from None
    if not isinstance(record, dict):
        raise CellError(f"{path}: a cell file holds one JSON object")
    record = {**OPTIONAL, **record}
    unknown, missing = sorted(set(record) - FIELDS), sorted(FIELDS - set(record))
    if unknown:
        raise CellError(f"{path}: unknown field(s) {', '.join(unknown)}")
    if missing:
        raise CellError(f"{path}: missing field(s) {', '.join(missing)}")
    if record["format"] != FORMAT:
        raise CellError(f"{path}: format: {record['format']!r}, this code reads {FORMAT}")
    return {**record, "policy": canonical(record["policy"])}


def read_cells(out_dir: Path) -> list[dict[str, Any]]:
    """Every cell file of a results folder, in name order."""
    if not out_dir.is_dir():
        raise CellError(f"{out_dir}: no such results folder")
    return [read_cell(path) for path in sorted(out_dir.glob("*.json"))]


def cells_of_old_file(results: dict[str, Any], half: str) -> Iterator[dict[str, Any]]:
    """The runs of a single-file results JSON (the sweep's old format) as cell records: no
    commit, arguments or CPU time were kept then, nor the p50 or the tenants' slowdown."""
    for cell in results["cells"].values():
        for policy, row in cell["policies"].items():
            yield {
                "format": FORMAT,
                "trace": cell["trace"],
                "half": results.get("window") or half,
                "compress": cell["compress"],
                "seed": cell["seed"],
                "policy": canonical(policy),
                "fleet": None,
                "queueing": results.get("queueing"),
                "local_share": None,
                "knobs": results.get("knobs") if policy == "default" else None,
                "commit": None,
                "clean": None,
                "args": None,
                "jobs": cell.get("jobs"),
                "offered_load_gpus": cell.get("offered_load_gpus"),
                "offered_load_share": cell.get("offered_load_share", 0.0),
                "metrics": row,
                "cpu_s": None,
                "wall_s": cell.get("seconds", {}).get(policy),
                "finished_at": None,
                **OPTIONAL,
            }


def estimator_runs(records: list[dict[str, Any]]) -> list[ReplayEstimateRun]:
    """The broker presets' wait-estimator figures in the cell records, to keep for /fleet/."""
    runs = []
    for r in records:
        report = estimator_of(r["metrics"])
        if report is not None:
            runs.append(
                ReplayEstimateRun(
                    trace=r["trace"],
                    half=r["half"],
                    time_compress=r["compress"],
                    seed=r["seed"],
                    policy=r["policy"],
                    jobs=r["jobs"],
                    report=report,
                )
            )
    return runs
