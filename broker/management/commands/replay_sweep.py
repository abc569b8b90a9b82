"""`manage.py replay_sweep`: traces x compressions x seeds under every policy, on the
held-out half of each trace by default.

By default one JSON file per cell in ``--results-dir`` (resumable cell by cell, each with
its commit, arguments, seed and CPU time) and the table with its spread over the seeds;
`manage.py replay_report` regenerates README.md, docs/replay.md and the picture from
them. With ``--results FILE`` (or ``--render-only``), the older single results file, a
Markdown summary of means against the race and the clairvoyant FIFO, and the picture."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from broker.fleet_file import FleetError
from broker.management.commands.replay_trace import isolated_database, ready_to_record, record_estimates
from broker.replay.cells import estimator_runs as cell_estimator_runs
from broker.replay.cells import read_cells, run_cells
from broker.replay.knobs import KNOBS_FILE, read_knobs
from broker.replay.pareto import draw  # matplotlib itself is imported only when drawing
from broker.replay.runner import LOWER_BOUND, WINDOWS, is_known, known_policies, policies_asked
from broker.replay.sweep import (
    SweepPlan,
    estimator_runs,
    load_results,
    markdown,
    merge_results,
    run_sweep,
    summarise,
)
from broker.replay.spread_report import markdown as spread_markdown
from broker.replay.target_load import parse_targets
from broker.replay.trace import TraceError

OLD_RESULTS = "replay-sweep.json"
# Django's own options: not the sweep's arguments
BASE_OPTIONS = {"verbosity", "settings", "pythonpath", "traceback", "no_color", "force_color", "skip_checks"}
SWEEP_POLICIES = ("multikueue-race", "default", "default+burst30m", "clairvoyant-fifo", "multikueue-incremental")


def _floats(text: str, name: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise CommandError(f"--{name}: comma-separated numbers, not {text!r}") from None
    if not values:
        raise CommandError(f"--{name}: give at least one")
    return values


def _plan(opts: dict, policies: tuple[str, ...]) -> SweepPlan:
    if not opts["traces"]:
        raise CommandError("traces: give at least one trace CSV file (or --render-only)")
    try:
        knobs = read_knobs(Path(opts["knobs"])) if opts["knobs"] and "default" in policies else None
    except ValueError as exc:
        raise CommandError(f"--knobs: {exc}") from None
    return SweepPlan(
        traces=tuple(Path(t) for t in opts["traces"]),
        compressions=_floats(opts["compress"], "compress"),
        seeds=tuple(int(s) for s in _floats(opts["seeds"], "seeds")),
        policies=policies,
        fleet=Path(opts["fleet"]),
        window=opts["window"],
        queueing=opts["local_queues"],
        knobs=knobs,
        target_loads=_targets(opts["target_load"]),
    )


def _targets(raw: str) -> tuple[float | None, ...]:
    if not raw.strip():
        return (None,)
    try:
        return tuple(parse_targets(raw))
    except ValueError as exc:
        raise CommandError(str(exc)) from None


class Command(BaseCommand):
    help = "Replay traces at several loads and seeds; summarise against the race and the clairvoyant FIFO."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("traces", nargs="*", help="trace CSV files (none with --render-only)")
        parser.add_argument("--fleet", default=str(settings.GPUBROKER_FLEET_FILE))
        parser.add_argument("--compress", default="3,5,8", help="arrival compressions")
        parser.add_argument(
            "--target-load",
            default="",
            help="also scale the on-prem nodes to each of these loads, e.g. 0.7,0.9,1.1 (a cell per load; "
            "default: the fleet as written)",
        )
        parser.add_argument("--seeds", default="11,12,13,14,15", help="at least 5 for an interval worth quoting")
        parser.add_argument(
            "--policies", default=",".join(SWEEP_POLICIES), help=f"comma-separated, of: {', '.join(known_policies())}"
        )
        parser.add_argument(
            "--half",
            "--window",
            dest="window",
            choices=WINDOWS,
            default="second",
            help="the jobs in submit-time order, split at the middle job (default: second, the held-out half)",
        )
        parser.add_argument(
            "--knobs",
            default=str(KNOBS_FILE),
            help="the knobs replay_tune chose on the first halves: 'default' is the policy file with them "
            "('' for the policy file as it stands)",
        )
        parser.add_argument(
            "--merge", default="", help="comma-separated results files of other runs, summarised with this one"
        )
        parser.add_argument("--local-queues", choices=("backfill", "strict"), default="backfill")
        parser.add_argument(
            "--results-dir",
            default="replay-results",
            help="one JSON file per cell (trace, half, compression, seed, policy); cells with a file are not rerun",
        )
        parser.add_argument(
            "--results",
            default="",
            help=f"the older single JSON results file instead of --results-dir (with --render-only: {OLD_RESULTS} "
            "unless given); cells already in it are not rerun",
        )
        parser.add_argument("--summary", default="", help="also write the Markdown here")
        parser.add_argument("--png", default="", help="draw the Pareto picture here")
        parser.add_argument(
            "--summary-seeds", default="", help="summarise and draw only these seeds (comma-separated; default: all)"
        )
        parser.add_argument(
            "--render-only", action="store_true", help="summarise the results file without running anything"
        )
        parser.add_argument(
            "--no-record",
            action="store_true",
            help="do not keep the broker presets' wait-estimator error in the configured database (/fleet/ shows it)",
        )

    def handle(self, *args, **opts) -> None:
        policies = policies_asked(opts["policies"], self.stderr.write)
        unknown = [p for p in policies if not is_known(p)]
        if unknown:
            raise CommandError(f"--policies: unknown {', '.join(unknown)}")
        if not opts["results"] and not opts["render_only"]:
            self._cells(opts, policies)
            return
        if LOWER_BOUND in policies:
            raise CommandError(f"--policies: {LOWER_BOUND} is written as a cell of its own, with --results-dir only")
        out = Path(opts["results"] or OLD_RESULTS)
        # checked before any work (record_estimates checks again for --render-only)
        record = not opts["no_record"] and (opts["render_only"] or ready_to_record(self.stderr.write))
        if not opts["render_only"]:
            plan = _plan(opts, policies)
            try:
                with isolated_database():
                    run_sweep(plan, out, progress=self.stderr.write)
            except (TraceError, FleetError, ValueError) as exc:
                raise CommandError(str(exc)) from None
        merged = [Path(p) for p in opts["merge"].split(",") if p.strip()]
        results = all_results = merge_results([out, *merged])
        if opts["summary_seeds"]:
            keep = {int(s) for s in _floats(opts["summary_seeds"], "summary-seeds")}
            results = {**all_results, "cells": {k: c for k, c in all_results["cells"].items() if c["seed"] in keep}}
        summaries = summarise(results)
        text = markdown(summaries)
        self.stdout.write(text)
        if opts["summary"]:
            Path(opts["summary"]).write_text(text + "\n", encoding="utf-8")
        if opts["png"]:
            draw(summaries, Path(opts["png"]))
        if record:  # after the summary: the result is out whatever the database does
            half = load_results(out).get("window") or opts["window"]
            record_estimates(estimator_runs(all_results, half), self.stderr.write)

    def _cells(self, opts: dict, policies: tuple[str, ...]) -> None:
        """A sweep into one file per cell, then the table with its spread (stdout)."""
        plan = _plan(opts, policies)
        record = not opts["no_record"] and ready_to_record(self.stderr.write)
        out = Path(opts["results_dir"])
        arguments = {k: v for k, v in opts.items() if k not in BASE_OPTIONS}
        try:
            with isolated_database():
                run_cells(plan, out, arguments, progress=self.stderr.write)
            records = read_cells(out)
            text = spread_markdown(records)
        except (TraceError, FleetError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(text)
        self.stderr.write(f"manage.py replay_report --results-dir {out}: README.md, docs/replay.md and the picture")
        if record:  # after the table: the result is out whatever the database does
            record_estimates(cell_estimator_runs(records), self.stderr.write)
