"""Tuning on the first halves only, and the report reading the knobs it chose."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from broker.fleet_file import parse_fleet
from broker.placement.policy_loader import load_policy
from broker.replay.knobs import Knobs, read_knobs
from broker.replay.runner import ReplayConfig, load_jobs, make_strategy
from broker.replay.sweep import SweepPlan, merge_results, run_sweep
from broker.replay.synth import SynthOptions
from broker.services.fleet.policy import current_policy
from tests.broker.replay.conftest import FRAGMENTED_FLEET

# 12 jobs, a minute apart: the first half is t00..t05, the second t06..t11
ROWS = [f"t{i:02d},{i * 60},,G2,{1 + i % 2},1,{900 + 60 * i},Running" for i in range(12)]
FIRST = {f"t{i:02d}" for i in range(6)}
SECOND = {f"t{i:02d}" for i in range(6, 12)}


@pytest.fixture
def no_isolation(monkeypatch):
    # inside pytest the test database is already isolated; a second one would replace it
    from broker.management.commands import replay_sweep, replay_trace, replay_tune

    for module in (replay_trace, replay_sweep, replay_tune):
        monkeypatch.setattr(module, "isolated_database", contextlib.nullcontext)


def _jobs(trace, half: str) -> set[str]:
    config = ReplayConfig(trace=trace, fleet=Path("unused.yaml"), policies=(), synth=SynthOptions(seed=11), window=half)
    return {j.key for j in load_jobs(config)[1]}


def _broker_jobs(trace, half: str) -> int:
    """The half's jobs the broker is sent (the rest go straight to a cluster's own queue)."""
    config = ReplayConfig(trace=trace, fleet=Path("unused.yaml"), policies=(), synth=SynthOptions(seed=11), window=half)
    return sum(not j.local for j in load_jobs(config)[1])


def test_the_halves_split_the_jobs_by_submit_time_and_never_overlap(trace_file):
    trace = trace_file(list(reversed(ROWS)))  # file order is not arrival order
    assert _jobs(trace, "first") == FIRST and _jobs(trace, "second") == SECOND


def test_tuning_never_replays_a_job_of_the_second_half(transactional_db, no_isolation, trace_file, fleet_file, tmp_path):
    results, knobs_out = tmp_path / "tune.json", tmp_path / "knobs.json"
    call_command(
        "replay_tune", str(trace_file(ROWS)), "--fleet", str(fleet_file()), "--compress", "2", "--seeds", "11",
        "--burst-minutes", "0,60", "--results", str(results), "--knobs-out", str(knobs_out),
    )  # fmt: skip
    tuned = json.loads(results.read_text())
    assert set(tuned["jobs_seen"]["trace.csv"]) == FIRST
    assert not set(tuned["jobs_seen"]["trace.csv"]) & SECOND
    runs = tuned["cells"]["trace.csv|x2|seed 11"]["policies"]
    assert set(runs) == {"multikueue-race", "default[burst0m]", "default[burst60m]"}
    assert {run["jobs"] for run in runs.values()} == {_broker_jobs(trace_file(ROWS), "first")}
    chosen = json.loads(knobs_out.read_text())
    assert chosen["tuned_on"] == [{"trace": "trace.csv", "half": "first", "compress": 2.0, "seed": 11,
                                   "jobs_replayed": len(FIRST)}]
    assert read_knobs(knobs_out).label == chosen["ranking"][0]["label"]


def test_the_report_replays_default_with_the_tuned_knobs(transactional_db, no_isolation, trace_file, fleet_file, tmp_path):
    knobs_file, results = tmp_path / "knobs.json", tmp_path / "sweep.json"
    knobs_file.write_text(json.dumps({"knobs": {"burst_min_onprem_wait_s": 5400.0, "queue_wait_weight": 0.5}}))
    call_command(
        "replay_sweep", str(trace_file(ROWS)), "--fleet", str(fleet_file()), "--compress", "2", "--seeds", "11",
        "--policies", "multikueue-race,default", "--knobs", str(knobs_file), "--results", str(results),
    )  # fmt: skip
    report = json.loads(results.read_text())
    assert report["window"] == "second"
    assert report["knobs"] == {"burst_min_onprem_wait_s": 5400.0, "reassess_share": None, "queue_wait_weight": 0.5,
                               "aging_queue_weight_per_hour": None, "policy_hold_withdraw_s": None,
                               "aging_queue_after_s": None, "aging_move_past_queue_after_s": None,
                               "aging_max_moves": None}
    assert report["cells"]["trace.csv|x2|seed 11"]["policies"]["default"]["jobs"] == _broker_jobs(
        trace_file(ROWS), "second"
    )


def test_default_with_knobs_is_the_policy_file_with_those_keys_set(db):
    knobs = Knobs(
        1800.0, 0.6, 2.0, 0.0, 0.0, aging_queue_after_s=0.0, aging_move_past_queue_after_s=900.0, aging_max_moves=5
    )
    strategy = make_strategy("default", parse_fleet(FRAGMENTED_FLEET, source="f"), knobs)
    policy = load_policy(strategy.policy_text)  # type: ignore[attr-defined]
    assert (policy.burst.min_onprem_wait_s, policy.burst.reassess_share) == (1800.0, 0.6)
    assert policy.weights["queue_wait_s"] == 2.0 and policy.aging.queue_weight_per_hour == 0.0
    assert (policy.aging.queue_after_s, policy.aging.move_past_queue_after_s) == (0.0, 900.0)
    assert policy.aging.max_moves == 5
    assert knobs.label == "default[burst30m,reassess0.6,wait2,age0,hold0m,queue0m,move15m,moves5]"
    assert policy.policy_hold_withdraw_s == 0.0
    assert policy.gpu_classes.keys() == load_policy(current_policy().text).gpu_classes.keys()


def test_a_report_refuses_to_resume_default_runs_made_with_other_knobs(db, trace_file, fleet_file, tmp_path):
    results = tmp_path / "sweep.json"
    results.write_text(json.dumps({"cells": {"c": {"policies": {"default": {}}}}, "knobs": None}))
    plan = SweepPlan(
        traces=(trace_file(ROWS),), compressions=(2.0,), seeds=(11,), policies=("default",),
        fleet=fleet_file(), knobs=Knobs(600.0),
    )  # fmt: skip
    with pytest.raises(ValueError, match="used knobs None"):
        run_sweep(plan, results)


def test_an_unreadable_knobs_file_is_a_clear_error(db, no_isolation, trace_file, fleet_file, tmp_path):
    bad = tmp_path / "knobs.json"
    bad.write_text(json.dumps({"knobs": {"burst_min_onprem_wait_s": 0, "budget": 3}}))
    with pytest.raises(CommandError, match="--knobs: .*unknown budget"):
        call_command("replay_sweep", str(trace_file(ROWS)), "--fleet", str(fleet_file()), "--knobs", str(bad),
                     "--policies", "default", "--results", str(tmp_path / "r.json"))


def test_results_of_two_runs_are_summarised_side_by_side(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({"cells": {"k": {"trace": "t", "policies": {"multikueue-race": {"x": 1}}}}}))
    b.write_text(json.dumps({"cells": {"k": {"trace": "t", "policies": {"default": {"x": 2}}}}}))
    assert set(merge_results([a, b])["cells"]["k"]["policies"]) == {"multikueue-race", "default"}



def test_the_shipped_knobs_were_tuned_on_first_halves_and_are_the_reports_default():
    from broker.management.commands.replay_sweep import Command  # noqa: PLC0415
    from broker.replay.knobs import KNOBS_FILE  # noqa: PLC0415

    read_knobs(KNOBS_FILE)
    assert {cell["half"] for cell in json.loads(KNOBS_FILE.read_text())["tuned_on"]} == {"first"}
    parser = Command().create_parser("manage.py", "replay_sweep")
    assert parser.parse_args(["t.csv"]).knobs == str(KNOBS_FILE)
