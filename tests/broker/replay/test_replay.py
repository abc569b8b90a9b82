"""Whole replays: deterministic under a seed, and the command that prints the table."""
from __future__ import annotations

import contextlib

import pytest
from django.core.management import CommandError, call_command

from broker.replay.jobs import TimeOptions
from broker.replay.runner import DEFAULT_POLICIES, ReplayConfig, load_jobs, run_policies
from broker.replay.synth import SynthOptions
from broker.replay.table import render

# a trace without tenants or gangs, as the openb trace: the generator adds both
ROWS = [f"p{i:02d},{i * 40},,{'G2' if i % 3 else ''},{1 + i % 2},1,{600 + 97 * i},Running"
        for i in range(24)]


@pytest.fixture
def config(trace_file, fleet_file):
    def _make(seed: int = 7, policies=DEFAULT_POLICIES) -> ReplayConfig:
        return ReplayConfig(trace=trace_file(ROWS), fleet=fleet_file(), policies=policies,
                            synth=SynthOptions(seed=seed, gang_fraction=0.4),
                            time=TimeOptions(time_compress=2.0))
    return _make


def test_same_seed_same_table(transactional_db, config):
    first, second = run_policies(config()), run_policies(config())
    assert [m.policy for m in first.metrics] == list(DEFAULT_POLICIES)
    assert first.metrics == second.metrics
    assert render(first) == render(second)
    assert first.synth.gangs_added > 0


def test_other_seed_other_mix(config):
    assert load_jobs(config(seed=7))[1] != load_jobs(config(seed=8))[1]


def test_every_replayed_job_is_accounted_for_the_local_users_jobs_apart(transactional_db, config):
    report = run_policies(config())
    local = sum(j.local for j in report.jobs)
    assert 0 < local < len(report.jobs)  # about 30% by default
    for m in report.metrics:
        assert m.jobs == len(report.jobs) - local and m.started + m.never_placed == m.jobs, m.policy
        assert m.extra["local jobs"] == local, m.policy


@pytest.fixture
def no_isolation(monkeypatch):
    # inside pytest the test database is already isolated; a second one would replace it
    from broker.management.commands import replay_trace

    monkeypatch.setattr(replay_trace, "isolated_database", contextlib.nullcontext)


def test_command_prints_and_writes_the_table(transactional_db, no_isolation, trace_file, fleet_file,
                                             tmp_path, capsys):
    out = tmp_path / "table.md"
    call_command("replay_trace", str(trace_file(ROWS)), "--fleet", str(fleet_file()),
                 "--policies", "default,multikueue-race", "--limit", "10", "--seed", "3",
                 "--time-compress", "4", "--breakdown", "--output", str(out))
    text = capsys.readouterr().out
    assert "| default |" in text and "| multikueue-race |" in text
    assert "arrivals compressed x4" in text and "seed 3" in text
    assert "Waits by GPU class" in text and "Gang waits by shape, workers x GPUs each" in text
    assert "Broker loop: production" in text and "local p95 wait (min)" in text
    assert out.read_text() == text


def test_the_command_says_each_tenant_months_spend_against_the_budget(transactional_db, no_isolation, trace_file,
                                                                       fleet_file, capsys):
    call_command("replay_trace", str(trace_file(ROWS)), "--fleet", str(fleet_file()), "--policies",
                 "default,multikueue-race", "--limit", "10", "--cloud-budget", "25", "--no-record")
    text = capsys.readouterr().out
    assert "| tenant-months over the budget |" in text and "(budget 25)" in text


def test_a_negative_budget_is_refused_naming_the_option(db, no_isolation, trace_file):
    with pytest.raises(CommandError, match="--cloud-budget"):
        call_command("replay_trace", str(trace_file(ROWS)), "--cloud-budget", "-5", "--no-record")


def test_command_reports_a_bad_trace_line(db, no_isolation, trace_file, fleet_file):
    bad = trace_file(["a,0,,,1,1,10,Running", "b,zero,,,1,1,10,Running"])
    with pytest.raises(CommandError, match=r"trace.csv:3: submit_time_s"):
        call_command("replay_trace", str(bad), "--fleet", str(fleet_file()))


def test_command_refuses_an_unknown_policy(db, no_isolation, trace_file, fleet_file):
    with pytest.raises(CommandError, match="unknown policy 'fifo'"):
        call_command("replay_trace", str(trace_file(ROWS)), "--fleet", str(fleet_file()),
                     "--policies", "default,fifo")


def test_the_command_keeps_each_presets_wait_estimator_error_for_the_fleet_page(transactional_db, no_isolation, trace_file,
                                                                                 fleet_file, capsys):
    from broker.models import ReplayEstimate  # noqa: PLC0415

    args = [str(trace_file(ROWS)), "--fleet", str(fleet_file()), "--policies", "default,multikueue-race",
            "--limit", "10", "--seed", "3", "--time-compress", "4"]
    call_command("replay_trace", *args, "--no-record")
    assert not ReplayEstimate.objects.exists()
    call_command("replay_trace", *args)
    [row] = ReplayEstimate.objects.all()  # the race predicts nothing: only the preset's run
    assert (row.trace, row.half, row.time_compress, row.seed, row.policy, row.jobs) == (
        "trace.csv", "all", 4.0, 3, "default", 10)
    assert 0 < row.count <= 10 and row.p90_abs_s >= row.p50_abs_s >= 0
    assert sum(d.summary.count for d in row.report().by_destination) == row.count
    assert "recorded: /fleet/ shows it" in capsys.readouterr().err


def test_the_command_records_in_the_configured_database_not_in_its_throwaway_one(trace_file, fleet_file,
                                                                                  tmp_path):
    """The whole command in a process of its own, on a SQLite file: the replay runs in an
    in-memory database, and what it records must land in the file afterwards."""
    import os  # noqa: PLC0415
    import sqlite3  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    root = Path(__file__).resolve().parents[3]
    database = tmp_path / "portal.sqlite3"
    env = {k: v for k, v in os.environ.items() if k not in ("CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE")}
    env.update(DATABASE_URL=f"sqlite:///{database}", PYTHONPATH=str(root))

    def manage(*args: str) -> None:
        result = subprocess.run([sys.executable, "manage.py", *args], cwd=root, env=env, capture_output=True,
                                text=True, timeout=300)
        assert result.returncode == 0, result.stderr

    manage("migrate", "-v0")
    manage("replay_trace", str(trace_file(ROWS)), "--fleet", str(fleet_file()), "--policies", "default",
           "--limit", "8", "--seed", "3")
    with contextlib.closing(sqlite3.connect(database)) as db:
        rows = db.execute("SELECT policy, jobs FROM broker_replayestimate").fetchall()
    assert rows == [("default", 8)]


def test_on_a_fresh_unmigrated_database_the_command_migrates_it_first_and_keeps_its_result(trace_file, fleet_file,
                                                                                           tmp_path):
    """A new user's first run: the configured database was never migrated; the command says so,
    migrates it before any work, and the figures are there at the end (no missing table)."""
    import os  # noqa: PLC0415
    import sqlite3  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    root = Path(__file__).resolve().parents[3]
    database = tmp_path / "fresh.sqlite3"
    env = {k: v for k, v in os.environ.items() if k not in ("CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE")}
    env.update(DATABASE_URL=f"sqlite:///{database}", PYTHONPATH=str(root))
    result = subprocess.run([sys.executable, "manage.py", "replay_trace", str(trace_file(ROWS)), "--fleet",
                             str(fleet_file()), "--policies", "default,oracle", "--limit", "8", "--seed", "3"],
                            cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "not migrated: migrating it first" in result.stderr
    assert "'oracle' is now called 'clairvoyant-fifo'" in result.stderr
    assert "| clairvoyant-fifo |" in result.stdout and "Lower bound on the mean wait" in result.stdout
    with contextlib.closing(sqlite3.connect(database)) as db:
        rows = db.execute("SELECT policy, jobs FROM broker_replayestimate").fetchall()
    assert rows == [("default", 8)]


def test_the_report_says_which_calibration_the_simulator_passed(transactional_db, no_isolation, trace_file, fleet_file, capsys):
    from broker.services.fleet.calibration import CalibrationFigures, calibration_record  # noqa: PLC0415

    args = [str(trace_file(ROWS)), "--fleet", str(fleet_file()), "--policies", "default", "--limit", "5",
            "--no-record"]
    call_command("replay_trace", *args)
    assert "Simulator: no calibration against a real scheduler recorded here" in capsys.readouterr().out
    rep = {"jobs": 36, "pair_order": 0.97, "median_abs_error_s": 3.2, "p95_abs_error_s": 12.0,
           "reason_agreement": 0.8}
    calibration_record(figures=CalibrationFigures(
        cluster="ci", control_plane="slurm 22.05.8", partition="calib", job_list="contended-16gpu",
        commit="abc1234", scheduler="bf_interval=2", cycle_s=2.0, repetitions=[rep, rep, rep]))
    call_command("replay_trace", *args)
    said = capsys.readouterr().out
    assert "Simulator: calibrated against slurm 22.05.8 at commit abc1234" in said
    assert "97% of job pairs started in the same order, median start error 3.2 s, medians of 3 repetitions" in said


def test_a_replay_whose_recording_fails_after_the_run_still_prints_its_table(transactional_db, no_isolation, trace_file,
                                                                             fleet_file, monkeypatch, capsys):
    """The reported failure: the figures go to a database without their table after minutes of work.
    The table is out first, and the failure is a note, not a traceback."""
    from django.db import OperationalError  # noqa: PLC0415

    from broker.management.commands import replay_trace  # noqa: PLC0415

    def missing_table(**_):
        raise OperationalError("no such table: broker_replayestimate")

    monkeypatch.setattr(replay_trace, "record_replay_estimates", missing_table)
    call_command("replay_trace", str(trace_file(ROWS)), "--fleet", str(fleet_file()), "--policies",
                 "default,multikueue-race", "--limit", "6", "--seed", "3")
    said = capsys.readouterr()
    assert "| default |" in said.out and "| multikueue-race |" in said.out
    assert "not recorded in" in said.err and "no such table: broker_replayestimate" in said.err
    assert "the replay's table is complete" in said.err


def test_a_replay_on_a_database_that_cannot_be_migrated_still_prints_its_table(trace_file, fleet_file,
                                                                                 tmp_path):
    """A configured database that cannot even be opened (a SQLite file in a folder that does not
    exist): the replay says it will not record, runs, and prints its table."""
    import os  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    root = Path(__file__).resolve().parents[3]
    database = tmp_path / "no-such-folder" / "portal.sqlite3"
    env = {k: v for k, v in os.environ.items() if k not in ("CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE")}
    env.update(DATABASE_URL=f"sqlite:///{database}", PYTHONPATH=str(root))
    result = subprocess.run([sys.executable, "manage.py", "replay_trace", str(trace_file(ROWS)), "--fleet",
                             str(fleet_file()), "--policies", "default,multikueue-race", "--limit", "6"],
                            cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "cannot be migrated" in result.stderr and "not recorded in" in result.stderr
    assert "| default |" in result.stdout and "| multikueue-race |" in result.stdout
    assert not database.parent.exists()


def test_every_tick_runs_the_production_loop_without_the_harness_shortcuts(transactional_db, no_isolation,
                                                                           trace_file, fleet_file, capsys):
    args = [str(trace_file(ROWS)), "--fleet", str(fleet_file()), "--policies", "default", "--limit", "8", "--no-record"]
    call_command("replay_trace", *args)
    shortcuts = capsys.readouterr().out
    call_command("replay_trace", *args, "--every-tick")
    assert capsys.readouterr().out == shortcuts  # the same decisions on this slice, hence the same table
