"""`manage.py replay_trace TRACE`: replay a job trace under several placement policies.

The broker's presets need a database; the command runs them in a throwaway one (a test
database: in memory on SQLite), so nothing the replay creates (clusters named as in the
fleet file, thousands of workloads) reaches the configured database.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterator

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.core.management import call_command
from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor

from broker.fleet_file import FleetError
from broker.replay.jobs import TimeOptions
from broker.replay.knobs import read_knobs
from broker.replay.local_jobs import DEFAULT_LOCAL_SHARE
from broker.replay.priorities import PriorityScenario, parse_priorities, parse_shares
from broker.replay.runner import (
    LOOPS,
    DEFAULT_POLICIES,
    WINDOWS,
    ReplayConfig,
    estimator_runs,
    known_policies,
    policies_asked,
    run_policies,
)
from broker.replay.synth import SynthOptions
from broker.replay.target_load import LoadScaling, parse_targets
from broker.replay.table import calibration_words, render
from broker.selectors.workloads import latest_calibration
from broker.replay.trace import TraceError
from broker.services.placing.replay_estimates import ReplayEstimateRun, record_replay_estimates


@contextlib.contextmanager
def isolated_database() -> Iterator[None]:
    """A fresh, migrated test database for the run, dropped afterwards."""
    old_name = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        yield
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
        # SQLite's wrapper does not close an in-memory database (the throwaway one here),
        # so without this the connection would go on writing there under the old name
        connection.close()


def calibration_line() -> str:
    """Which calibration the simulator under these figures passed (the newest recorded in
    the configured database), or "" when none is (or the database has no such table)."""
    try:
        row = latest_calibration()
    except DatabaseError:
        return ""
    if row is None:
        return ""
    return calibration_words(
        row.control_plane,
        row.commit,
        f"{row.recorded_at:%Y-%m-%d}",
        row.pair_order,
        row.median_abs_error_s,
        len(row.repetitions),
    )


def ready_to_record(say: Callable[[str], object]) -> bool:
    """Whether the configured database can keep the estimator's figures, found before any
    work: migrated first when it lacks tables (a fresh clone), so a run of minutes never
    ends on a missing table. A database that cannot be read or migrated is skipped with a
    note: the replay's table matters more than the figures it would record."""
    try:
        executor = MigrationExecutor(connection)
        if executor.migration_plan(executor.loader.graph.leaf_nodes()):
            say("the configured database is not migrated: migrating it first (it keeps the estimator's figures)")
            call_command("migrate", interactive=False, verbosity=0)
    except DatabaseError as exc:
        say(f"{_not_recorded(exc)} (the configured database cannot be migrated)")
        return False
    return True


def _not_recorded(exc: Exception) -> str:
    name = connection.settings_dict["NAME"]
    return f"the wait-estimator figures are not recorded in {name}: {exc}; the replay's table is complete"


def record_estimates(runs: list[ReplayEstimateRun], say: Callable[[str], None]) -> None:
    """Keep the runs' estimator figures in the configured database (after the throwaway
    one is gone), for /fleet/. Called after the table is out: a failure here costs the
    figures, never the result."""
    if not runs or not ready_to_record(say):
        return
    try:
        record_replay_estimates(runs=runs)
    except DatabaseError as exc:
        say(_not_recorded(exc))
        return
    say(f"wait-estimator error of {len(runs)} run(s) recorded: /fleet/ shows it")


def with_scaling(text: str, scaling: LoadScaling | None) -> str:
    """The report with its fleet line saying how the fleet was scaled (both loads, the nodes)."""
    if scaling is None:
        return text
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("Fleet: "):
            lines[i] = f"{line.rstrip('.')} ({scaling.describe()})."
            return "\n".join(lines)
    return f"Fleet {scaling.describe()}.\n{text}"


class Command(BaseCommand):
    help = "Replay a job trace through the fleet simulator under placement policies and baselines."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("trace", help="trace CSV (job_id,submit_time_s,tenant,gpu_type,...)")
        parser.add_argument(
            "--fleet",
            default=str(settings.GPUBROKER_FLEET_FILE),
            help="fleet description YAML (default: the demo fleet)",
        )
        parser.add_argument(
            "--policies", default=",".join(DEFAULT_POLICIES), help=f"comma-separated, of: {', '.join(known_policies())}"
        )
        parser.add_argument("--seed", type=int, default=7, help="synthetic mix and race ties")
        parser.add_argument("--limit", type=int, default=None, help="first N trace rows only")
        parser.add_argument(
            "--time-compress", type=float, default=1.0, help="divide the gaps between arrivals by this (durations kept)"
        )
        parser.add_argument("--max-duration-h", type=float, default=24.0, help="cap on a job's run time, hours")
        parser.add_argument("--tenants", type=int, default=6, help="synthetic tenants for rows without one")
        parser.add_argument(
            "--gang-fraction", type=float, default=0.1, help="share of GPU jobs made gangs when the trace has none"
        )
        parser.add_argument(
            "--half",
            "--window",
            dest="window",
            choices=WINDOWS,
            default="all",
            help="the jobs in submit-time order, split at the middle job: first (the tuning half), "
            "second (the held-out half), all",
        )
        parser.add_argument(
            "--knobs",
            default="",
            help="a replay_tune knobs file: 'default' is the policy file with those knobs (default: as it stands)",
        )
        parser.add_argument(
            "--local-queues",
            choices=("backfill", "strict"),
            default="backfill",
            help="the simulated clusters' own queues: backfill (Slurm's default, Kueue BestEffortFIFO) or strict FIFO",
        )
        parser.add_argument(
            "--loop",
            choices=LOOPS,
            default="production",
            help="how the broker's presets run: production (beat's tasks on their intervals, a worker; the broker "
            "learns only from its syncs and polls) or instant (the older harness: synced right before placing)",
        )
        parser.add_argument(
            "--every-tick",
            action="store_true",
            help="production loop: run every beat entry at every tick, without the harness's shortcuts (the "
            "reference the equivalence test and bench/bench_replay_loop.py compare with; slower)",
        )
        parser.add_argument(
            "--cloud-budget",
            type=float,
            default=None,
            help="every broker tenant's monthly cloud budget (bursting keeps within it; the table says each "
            "tenant-month's spend against it); default: none",
        )
        parser.add_argument(
            "--local-share",
            type=float,
            default=DEFAULT_LOCAL_SHARE,
            help="share of the jobs local users submit straight into a cluster's own queue, never seen by the broker "
            f"(default {DEFAULT_LOCAL_SHARE:g}; 0 for none)",
        )
        parser.add_argument(
            "--target-load",
            default="",
            help="scale the on-prem nodes so that the busy window's offered GPUs over the on-prem GPUs is this "
            "(whole nodes, never below the largest gang); a comma list (0.7,0.9,1.1) runs each in turn",
        )
        parser.add_argument(
            "--priority-mix",
            default="",
            help="the priority scenario: shares of the jobs given the policy's fleet priority classes, drawn per job "
            "from the seed (production=0.1,scavenger=0.3; the rest none, i.e. normal); adds a table by class with "
            "what preemption cost (compare default with default+preempt)",
        )
        parser.add_argument(
            "--min-share",
            default="",
            help="replay tenants' guaranteed minimum shares of the fleet's GPUs (tenant-0=0.3), in the policy-file "
            "policies (default, default+burst<N>m, default+preempt)",
        )
        parser.add_argument(
            "--preemptible",
            default="",
            help="the priorities the broker's preemption may take (low,normal); default: the policy file's",
        )
        parser.add_argument(
            "--breakdown", action="store_true", help="also print waits per GPU class, single jobs and gangs apart"
        )
        parser.add_argument("--output", default="", help="also write the table to this file")
        parser.add_argument(
            "--no-record",
            action="store_true",
            help="do not keep the broker presets' wait-estimator error in the configured database (/fleet/ shows it)",
        )

    def handle(self, *args, **opts) -> None:
        config = self._config(opts)
        targets = self._targets(opts)
        record = not opts["no_record"] and ready_to_record(self.stderr.write)
        texts = (
            [self._run(replace(config, target_load=t), opts, record) for t in targets]
            if targets
            else [self._run(config, opts, record)]
        )
        if opts["output"]:
            Path(opts["output"]).write_text("\n".join(texts), encoding="utf-8")

    def _run(self, config: ReplayConfig, opts: dict, record: bool) -> str:
        """One replay of every policy, printed (and its estimator figures recorded after)."""
        try:
            with isolated_database():
                report = run_policies(config, progress=self.stderr.write)
        except (TraceError, FleetError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        text = with_scaling(render(report, breakdown=opts["breakdown"], calibration=calibration_line()), report.scaling)
        self.stdout.write(text)
        if record:  # after the table: the result is out whatever the database does
            record_estimates(estimator_runs(report), self.stderr.write)
        return text

    def _targets(self, opts: dict) -> list[float]:
        try:
            return parse_targets(opts["target_load"]) if opts["target_load"].strip() else []
        except ValueError as exc:
            raise CommandError(str(exc)) from None

    def _config(self, opts: dict) -> ReplayConfig:
        try:
            return ReplayConfig(
                trace=Path(opts["trace"]),
                fleet=Path(opts["fleet"]),
                policies=policies_asked(opts["policies"], self.stderr.write),
                synth=SynthOptions(seed=opts["seed"], tenants=opts["tenants"], gang_fraction=opts["gang_fraction"]),
                time=TimeOptions(time_compress=opts["time_compress"], max_duration_s=opts["max_duration_h"] * 3600),
                limit=opts["limit"],
                window=opts["window"],
                queueing=opts["local_queues"],
                knobs=read_knobs(Path(opts["knobs"])) if opts["knobs"] else None,
                local_share=opts["local_share"],
                loop=opts["loop"],
                cloud_budget=opts["cloud_budget"],
                every_tick=opts["every_tick"],
                scenario=PriorityScenario(
                    mix=parse_shares(opts["priority_mix"], "--priority-mix"),
                    min_shares=parse_shares(opts["min_share"], "--min-share"),
                    preemptible=parse_priorities(opts["preemptible"], "--preemptible"),
                ),
            )
        except ValueError as exc:
            message = str(exc).replace("local_share:", "--local-share:").replace("cloud_budget:", "--cloud-budget:")
            raise CommandError(message) from None
