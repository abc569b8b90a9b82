"""Results with their spread: the interval math, the ratio-or-gap rule, the cell files
(resumable, with what made them) and the table regenerated between its markers."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from broker.fleet_file import FleetDescription
from broker.replay.cells import FIELDS, Cell, git_state, read_cell, run_cells
from broker.replay.jobs import Skipped
from broker.replay.knobs import Knobs
from broker.replay.metrics import Metrics
from broker.replay.runner import ReplayConfig, ReplayReport
from broker.replay.spread import t_975, t_interval, vs_race
from broker.replay.spread_report import END, START, markdown, rewrite_between_markers
from broker.replay.sweep import SweepPlan
from broker.replay.synth import SynthReport

ROWS = [f"s{i:02d},{i * 60},,G2,{1 + i % 2},1,{900 + 60 * i},Running" for i in range(8)]


# -- the interval math ------------------------------------------------------------------


def test_the_t_quantiles_are_the_tables_and_approach_the_normal():
    assert t_975(4) == pytest.approx(2.776, abs=1e-3) and t_975(1) == pytest.approx(12.706, abs=1e-3)
    assert t_975(30) == pytest.approx(2.042, abs=1e-3)
    # beyond the table: the expansion, against published values
    assert t_975(40) == pytest.approx(2.0211, abs=1e-4) and t_975(120) == pytest.approx(1.9799, abs=1e-4)
    assert t_975(31) < t_975(30) and t_975(10_000) == pytest.approx(1.96, abs=1e-3)
    with pytest.raises(ValueError, match="degrees of freedom"):
        t_975(0)


def test_five_seeds_give_the_mean_and_its_student_t_interval():
    i = t_interval([1.0, 2.0, 3.0, 4.0, 5.0])  # s = sqrt(2.5); half-width 2.776 * s / sqrt(5)
    half = 2.7764 * math.sqrt(2.5) / math.sqrt(5)
    assert (i.mean, i.n) == (3.0, 5)
    assert i.low == pytest.approx(3.0 - half) and i.high == pytest.approx(3.0 + half)
    one = t_interval([7.0])
    assert one.mean == 7.0 and not one.has_spread and math.isnan(one.low)


def test_a_seed_gives_a_ratio_only_where_the_race_waited_at_least_ten_minutes():
    # seed 1: race p95 20 min -> ratio 0.5; seed 2: race 9.98 min -> gap +60 s
    v = vs_race([(600.0, 1200.0), (659.0, 599.0)], floor=600.0)
    assert v.ratio is not None and v.gap is not None
    assert (v.ratio.mean, v.ratio.n, v.gap.mean, v.gap.n) == (0.5, 1, 60.0, 1)
    exactly_ten = vs_race([(300.0, 600.0)], floor=600.0)
    assert exactly_ten.ratio is not None and exactly_ten.gap is None
    # a race that spent nothing: the gap, never a division by 0
    assert vs_race([(50.0, 0.0)], floor=0.0).ratio is None


# -- the cell files ---------------------------------------------------------------------


def _record(trace: str, seed: int, policy: str, p95_min: float, spend: float, compress: float = 5.0) -> dict:
    metrics = {
        "p50_wait_s": p95_min * 30,
        "p95_wait_s": p95_min * 60,
        "mean_wait_s": p95_min * 20,
        "p95_gang_wait_s": p95_min * 90,
        "cloud_spend": spend,
        "worst_tenant_slowdown": 1.5,
    }
    return {"format": 1, "trace": trace, "half": "second", "compress": compress, "seed": seed, "policy": policy,
            "fleet": "demo.yaml", "queueing": "backfill", "local_share": 0.3, "knobs": None,
            "commit": "0123456789abcdef", "clean": True, "args": {}, "jobs": 10, "offered_load_gpus": 60.0,
            "offered_load_share": 0.6, "metrics": metrics, "cpu_s": 1800.0, "wall_s": 1900.0,
            "finished_at": "2025-01-01T00:00:00+00:00"}  # fmt: skip


def _report(config: ReplayConfig) -> ReplayReport:
    """What a run returns, without the run: the resumability test counts calls, not minutes."""
    [policy] = config.policies
    metrics = Metrics(
        policy=policy,
        jobs=4,
        started=4,
        mean_wait_s=60.0,
        p95_wait_s=120.0,
        p95_gang_wait_s=0.0,
        mean_ttfg_s=60.0,
        p95_ttfg_s=120.0,
        failed_at_destination=0,
        fragmented=0,
        rejected=0,
        held_at_destination=0,
        never_placed=0,
        gpu_hours={},
        cloud_spend=10.0,
        utilisation=0.5,
    )
    synth = SynthReport(seed=config.synth.seed, tenants_added=0, gangs_added=0, gang_fraction=0.0, tenants=())
    return ReplayReport(config, 4, [], Skipped(), synth, FleetDescription(clusters=()), metrics=[metrics])


def _plan(trace: Path, fleet: Path, **kw) -> SweepPlan:
    return SweepPlan(traces=(trace,), compressions=(2.0,), seeds=(11, 12), policies=("multikueue-race", "default"),
                     fleet=fleet, **kw)  # fmt: skip


def test_a_sweep_resumes_without_rerunning_a_cell_whose_file_is_there(trace_file, fleet_file, tmp_path):
    ran: list[tuple[int, str]] = []

    def runner(config: ReplayConfig) -> ReplayReport:
        ran.append((config.synth.seed, config.policies[0]))
        return _report(config)

    plan, out = _plan(trace_file(ROWS), fleet_file()), tmp_path / "cells"
    out.mkdir()
    done = out / Cell(trace_file(ROWS), "second", 2.0, 11, "default").file_name
    done.write_text(json.dumps(_record("trace.csv", 11, "default", 1, 1)))
    written = run_cells(plan, out, {"seeds": "11,12"}, runner=runner)
    assert ran == [(11, "multikueue-race"), (12, "multikueue-race"), (12, "default")]
    assert len(written) == 3 and json.loads(done.read_text())["cpu_s"] == 1800.0  # left as it was
    ran.clear()
    assert run_cells(plan, out, {}, runner=runner) == [] and ran == []  # all there: nothing to run
    assert not list(out.glob("*.partial"))


def test_a_default_cell_made_with_other_knobs_is_refused_not_kept(trace_file, fleet_file, tmp_path):
    plan = _plan(trace_file(ROWS), fleet_file(), knobs=Knobs(600.0))
    out = tmp_path / "cells"
    out.mkdir()
    (out / Cell(trace_file(ROWS), "second", 2.0, 11, "default").file_name).write_text(
        json.dumps(_record("trace.csv", 11, "default", 1, 1))
    )
    with pytest.raises(ValueError, match=r"knobs: made with None"):
        run_cells(plan, out, {}, runner=_report)


def test_each_cell_file_records_the_commit_the_clean_tree_the_arguments_and_the_seed(trace_file, fleet_file, tmp_path):
    """A real (tiny) replay of the race: no database needed."""
    plan = SweepPlan(traces=(trace_file(ROWS),), compressions=(3.0,), seeds=(13,), policies=("multikueue-race",),
                     fleet=fleet_file(), window="all")  # fmt: skip
    [path] = run_cells(plan, tmp_path / "cells", {"compress": "3", "seeds": "13"})
    record = read_cell(path)
    root = Path(__file__).resolve().parents[3]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
    assert record["commit"] == (head or None)  # None: a copy of the code outside git
    assert isinstance(record["clean"], bool) or record["commit"] is None
    assert record["args"] == {"compress": "3", "seeds": "13"}
    assert (record["seed"], record["compress"], record["policy"], record["half"]) == (13, 3.0, "multikueue-race", "all")
    assert record["cpu_s"] >= 0 and record["jobs"] > 0
    assert {"p50_wait_s", "worst_tenant_slowdown", "p95_gang_wait_s", "cloud_spend"} <= set(record["metrics"])
    assert set(record) == FIELDS


def test_a_cell_file_with_an_unknown_field_is_refused_naming_the_file_and_the_field(tmp_path):
    out = tmp_path / "cells"
    out.mkdir()
    (out / "a.json").write_text(json.dumps({**_record("t.csv", 1, "default", 1, 1), "colour": "red"}))
    with pytest.raises(CommandError, match=r"a\.json: unknown field\(s\) colour"):
        call_command("replay_report", "--results-dir", str(out), "--markdown", "", "--png", "")


# -- the table ------------------------------------------------------------------------


def test_a_cell_with_fewer_than_five_seeds_is_flagged_in_the_table():
    records = [_record("t.csv", s, p, 20, 100) for s in (1, 2, 3) for p in ("multikueue-race", "default")]
    records += [_record("t.csv", s, p, 20, 100, compress=8.0) for s in range(1, 6) for p in ("multikueue-race",)]
    text = markdown(records)
    assert "| x5, 60% | default | 3 seeds: fewer than the 5 required |" in text
    assert "| x8, 60% | multikueue-race | 5 |" in text
    assert "Student-t 95% interval" in text and "CPU total: 5.50 h over 11 runs" in text


def test_the_table_gives_ratios_where_the_race_waited_ten_minutes_and_gaps_below():
    records = [
        _record("t.csv", 1, "multikueue-race", 20, 100), _record("t.csv", 1, "default", 10, 50),
        _record("t.csv", 2, "multikueue-race", 5, 100), _record("t.csv", 2, "default", 8, 50),
    ]  # fmt: skip
    against = [line for line in markdown(records).splitlines() if "| default |" in line][-1]
    cells = [c.strip() for c in against.split("|")]
    assert cells[7] == "0.50x (1 seed); gap +3.0 min (1 seed)"  # p95: 20 -> 10 min, then 5 -> 8 min
    assert cells[10] == "0.50x [0.50, 0.50]"  # spend: a ratio in both seeds


def test_the_report_rewrites_only_between_the_markers(tmp_path, capsys):
    out = tmp_path / "cells"
    out.mkdir()
    for seed in range(1, 6):
        for policy, wait in (("multikueue-race", 20), ("default", 12)):
            (out / f"{seed}-{policy}.json").write_text(json.dumps(_record("t.csv", seed, policy, wait + seed, 100)))
    # a marker quoted in prose is not a marker: only a line of its own is
    before, after = f"# Title\n\nProse kept as it is, naming `{START}`.\n", "\nMore prose, and the end.\n"
    page = tmp_path / "page.md"
    page.write_text(f"{before}{START}\nthe old table\n{END}{after}")
    call_command("replay_report", "--results-dir", str(out), "--markdown", str(page), "--png", "")
    text = page.read_text()
    assert text.startswith(before + START + "\n") and text.endswith(END + after)
    assert "the old table" not in text and "| t.csv | second | x5, 60% | default | 5 |" in text
    assert "table rewritten" in capsys.readouterr().err
    call_command("replay_report", "--results-dir", str(out), "--markdown", str(page), "--png", "")
    assert page.read_text() == text and "table unchanged" in capsys.readouterr().err


def test_a_page_without_the_markers_is_a_clear_error_naming_it(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("no markers here\n")
    with pytest.raises(ValueError, match=r"page\.md: needs one <!-- replay-table:start --> line"):
        rewrite_between_markers(page, "table")
    assert page.read_text() == "no markers here\n"


def test_without_matplotlib_the_report_writes_its_tables_and_says_why_there_is_no_picture(
    tmp_path, monkeypatch, capsys
):
    from broker.management.commands import replay_report  # noqa: PLC0415

    def no_matplotlib(*_):
        raise ImportError("No module named 'matplotlib'")

    monkeypatch.setattr(replay_report, "draw_spread", no_matplotlib)
    out = tmp_path / "cells"
    out.mkdir()
    (out / "a.json").write_text(json.dumps(_record("t.csv", 1, "multikueue-race", 20, 100)))
    page = tmp_path / "page.md"
    page.write_text(f"{START}\n{END}\n")
    call_command("replay_report", "--results-dir", str(out), "--markdown", str(page), "--png", str(tmp_path / "p.png"))
    said = capsys.readouterr()
    assert "the picture needs matplotlib" in said.err and "| multikueue-race |" in said.out
    assert "| multikueue-race |" in page.read_text() and "p.png" not in page.read_text()


def test_an_older_single_results_file_is_read_as_cells(tmp_path, capsys):
    old = tmp_path / "sweep.json"
    old.write_text(json.dumps({"window": "second", "queueing": "backfill", "knobs": None, "cells": {
        "a": {"trace": "t.csv", "compress": 5.0, "seed": 11, "jobs": 40, "offered_load_share": 0.6,
              "seconds": {"oracle": 3.0},
              "policies": {"multikueue-race": {"p95_wait_s": 1200, "cloud_spend": 100, "mean_wait_s": 300},
                           "oracle": {"p95_wait_s": 600, "cloud_spend": 80, "mean_wait_s": 200}}}}}))  # fmt: skip
    call_command("replay_report", "--results-dir", "", "--old-results", str(old), "--markdown", "", "--png", "")
    text = capsys.readouterr().out
    assert "| clairvoyant-fifo | 1 seed: fewer than the 5 required |" in text
    assert "no commit recorded (older results): 2" in text and "2 runs carry no CPU figure" in text
    assert "| n/a |" in text  # no p50 in the older results


def test_a_sweep_writes_one_file_per_cell_and_prints_the_table_with_its_spread(
    db, trace_file, fleet_file, tmp_path, monkeypatch, capsys
):
    import contextlib  # noqa: PLC0415

    from broker.management.commands import replay_sweep  # noqa: PLC0415

    # inside pytest the test database is already isolated; a second one would replace it
    monkeypatch.setattr(replay_sweep, "isolated_database", contextlib.nullcontext)
    out = tmp_path / "cells"
    args = [str(trace_file(ROWS)), "--fleet", str(fleet_file()), "--compress", "2", "--seeds", "11,12",
            "--policies", "multikueue-race,clairvoyant-fifo", "--half", "all", "--results-dir", str(out),
            "--no-record"]  # fmt: skip
    call_command("replay_sweep", *args)
    files = sorted(p.name for p in out.glob("*.json"))
    assert files == [f"trace__all__x2__seed{s}__{p}.json" for s in (11, 12)
                     for p in ("clairvoyant-fifo", "multikueue-race")]  # fmt: skip
    record = read_cell(out / files[0])
    assert record["args"]["seeds"] == "11,12" and "verbosity" not in record["args"]
    said = capsys.readouterr()
    assert "| clairvoyant-fifo | 2 seeds: fewer than the 5 required |" in said.out
    assert "CPU total:" in said.out and "manage.py replay_report --results-dir" in said.err
    call_command("replay_sweep", *args)  # resumed: every cell is there
    assert "CPU s" not in capsys.readouterr().err


def test_the_readme_and_the_replay_doc_each_have_the_block_the_report_rewrites():
    from broker.management.commands.replay_report import DEFAULT_MARKDOWN  # noqa: PLC0415
    from broker.replay.spread_report import between_markers  # noqa: PLC0415

    root = Path(__file__).resolve().parents[3]
    for page in DEFAULT_MARKDOWN:
        between_markers(root / page, "")  # raises when the markers are missing or doubled


def test_each_target_load_is_a_cell_of_its_own_recording_the_fleet_it_ran_on(trace_file, fleet_file, tmp_path):
    """A real (tiny) replay of the race at two target loads: a file per load, the scaled
    fleet in each, and the table's rows and fleet list say which load."""
    plan = SweepPlan(traces=(trace_file(ROWS),), compressions=(3.0,), seeds=(13,), policies=("multikueue-race",),
                     fleet=fleet_file(), window="all", target_loads=(0.7, 1.1))  # fmt: skip
    paths = run_cells(plan, tmp_path / "cells", {})
    assert sorted(p.name.split("__")[3] for p in paths) == ["load0.7", "load1.1"]
    records = [read_cell(p) for p in paths]
    assert sorted(r["target_load"] for r in records) == [0.7, 1.1]
    assert all(r["scaled_fleet"].startswith(f"scaled to target on-prem load {r['target_load']:.2f}") for r in records)
    table = markdown(records)
    assert "x3, target 0.7," in table and "x3, target 1.1," in table
    assert "Fleets used" in table and "target 1.1: scaled to target on-prem load 1.10" in table


def test_a_cell_file_from_before_target_loads_reads_as_the_fleet_as_written(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps(_record("t.csv", 1, "default", 1, 1)))
    record = read_cell(path)
    assert record["target_load"] is None and record["scaled_fleet"] is None
    assert "Fleets used" not in markdown([record])


def test_a_sweep_writes_the_lower_bound_of_each_cell_beside_the_policies(trace_file, fleet_file, tmp_path):
    """A real (tiny) sweep: the bound's file holds the mean wait it bounds (nothing replayed
    for it) and the table shows it at or below the race's mean wait."""
    plan = SweepPlan(traces=(trace_file(ROWS),), compressions=(3.0,), seeds=(13,),
                     policies=("multikueue-race", "lower-bound"), fleet=fleet_file(), window="all")  # fmt: skip
    paths = run_cells(plan, tmp_path / "cells", {})
    bound, race = (read_cell(p) for p in sorted(paths, key=lambda p: "multikueue" in p.name))
    assert bound["policy"] == "lower-bound" and set(bound["metrics"]) == {"mean_wait_s", "jobs"}
    assert 0 <= bound["metrics"]["mean_wait_s"] <= race["metrics"]["mean_wait_s"]
    assert bound["metrics"]["jobs"] == race["metrics"]["jobs"]  # the same scored jobs
    assert "| lower-bound | 1 seed: fewer than the 5 required | n/a | n/a |" in markdown([bound, race])


def test_the_sweeps_own_results_folder_does_not_make_the_tree_unclean(tmp_path):
    """A repository with one commit: a results file under the folder leaves it clean, any
    other untracked file does not."""
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("add", "code.py")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    results = tmp_path / "docs" / "replay-results"
    results.mkdir(parents=True)
    (results / "cell.json").write_text("{}")
    assert git_state(tmp_path, results=results)["clean"] is True
    assert git_state(tmp_path)["clean"] is False
    (tmp_path / "new.py").write_text("y = 2\n")
    assert git_state(tmp_path, results=results)["clean"] is False
