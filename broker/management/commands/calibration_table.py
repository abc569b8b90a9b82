"""`manage.py calibration_table FILE...`: the calibration tables of docs/simulator.md, made
from the JSON that ``manage.py calibrate --out`` wrote (one row per file: its control plane,
commit and repetitions, each figure as the median with the range over the repetitions).

``--real-vs-real``: instead, the real control plane against itself: every pair of a file's
real runs compared as the simulator is compared with each (pairs in the same order, median
start error), the median and range over those pairs: how far the simulator can be expected
to agree when the real scheduler does not repeat itself."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from broker.calibration.compare import compare, spread
from broker.calibration.played import Played

HEADER = (
    "| control plane | job list | real runs at | simulator at | reps | jobs | waited | pairs in the same order "
    "| median abs start error (s) | p95 abs start error (s) | same queue reason | ahead of an earlier job: "
    "real / simulated | preempted: real / simulated |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


class Command(BaseCommand):
    help = "Markdown table rows from calibrate --out files."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="+", type=Path)
        parser.add_argument("--real-vs-real", action="store_true", help="the real runs of each file against each other")

    def handle(self, *args: Any, **opts: Any) -> None:
        rows = [BETWEEN_HEADER if opts["real_vs_real"] else HEADER]
        for path in opts["files"]:
            try:
                data = json.loads(Path(path).read_text())
            except (OSError, json.JSONDecodeError) as exc:
                raise CommandError(f"{path}: {exc}") from exc
            rows.append(between_row(data) if opts["real_vs_real"] else row(data))
        self.stdout.write("\n".join(rows) + "\n")


BETWEEN_HEADER = (
    "| control plane | job list | real runs at | runs | pairs of runs | pairs in the same order "
    "| median abs start error (s) |\n|---|---|---|---|---|---|---|"
)


def between_row(data: dict[str, Any]) -> str:
    runs = [Played.from_json(r["real"]) for r in data["repetitions"]]
    pairs = [compare(a, b, cycle_s=float(data["cycle_s"])) for a, b in itertools.combinations(runs, 2)]
    side = runs[0].side if runs else data["control_plane"]
    return (
        f"| {side} | {data['job_list']} | `{data['commit']}` | {len(runs)} | {len(pairs)} "
        f"| {spread([p.pair_order for p in pairs])} | {spread([p.median_abs_error_s for p in pairs])} |"
    )


def row(data: dict[str, Any]) -> str:
    reps = [r["agreement"] for r in data["repetitions"]]
    side = data["repetitions"][0]["real"]["side"] if reps else data["control_plane"]

    def figure(key: str) -> str:
        return spread([float(r[key]) for r in reps])

    def preempted(key: str) -> str:  # runs recorded before preemption was counted had none
        return spread([float(r.get(key, 0)) for r in reps])

    def count(key: str) -> str:
        return spread([float(len(r[key])) for r in reps])

    return (
        f"| {side} | {data['job_list']} | `{data['commit']}` | `{data.get('resimulated_at') or data['commit']}` "
        f"| {len(reps)} | {reps[0]['jobs']} "
        f"| {figure('waited')} | {figure('pair_order')} | {figure('median_abs_error_s')} "
        f"| {figure('p95_abs_error_s')} | {figure('reason_agreement')} "
        f"| {count('ahead_real')} / {count('ahead_sim')} "
        f"| {preempted('preempted_real')} / {preempted('preempted_sim')} |"
    )
