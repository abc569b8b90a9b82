"""The sweep's summary: paired with the race seed for seed, the target, the frontier."""
from __future__ import annotations

from broker.replay.pareto import frontier
from broker.replay.sweep import markdown, summarise


def _cell(seed: int, policies: dict[str, tuple[float, float]]) -> dict:
    return {"trace": "t.csv", "compress": 5.0, "seed": seed, "offered_load_share": 0.6,
            "policies": {name: {"p95_wait_s": wait, "cloud_spend": spend, "failed_at_destination": 0,
                                "held_at_destination": 1, "never_placed": 0}
                         for name, (wait, spend) in policies.items()}}


def test_a_policy_is_compared_with_the_race_on_the_seeds_where_both_ran():
    results = {"cells": {
        "a": _cell(7, {"multikueue-race": (600, 100), "default": (300, 90), "oracle": (60, 200)}),
        # seed 11: the default has not run yet; its row must not count the race's seed 11
        "b": _cell(11, {"multikueue-race": (6000, 1000)}),
    }}
    rows = {s.policy: s for s in summarise(results)}
    default = rows["default"]
    assert (default.seeds, default.wait_vs_race, default.spend_vs_race) == (1, 0.5, 0.9)
    assert default.dominates_race and default.wait_over_clairvoyant_min == 4.0
    assert rows["multikueue-race"].seeds == 2 and not rows["clairvoyant-fifo"].dominates_race


def test_a_zero_race_wait_is_shown_as_such_not_as_a_ratio():
    results = {"cells": {"a": _cell(7, {"multikueue-race": (0, 100), "default": (60, 50)})}}
    text = markdown(summarise(results))
    assert "n/a (race 0)" in text


def test_the_frontier_keeps_the_points_nothing_beats_on_both_axes():
    points = [(1.0, 1.0, "race"), (0.5, 2.0, "cheap"), (2.0, 0.5, "fast"), (1.5, 1.5, "worse")]
    assert [p[2] for p in frontier(points)] == ["cheap", "race", "fast"]


def test_a_policy_that_ties_a_race_waiting_zero_meets_the_wait_target():
    results = {"cells": {"a": _cell(7, {"multikueue-race": (0, 100), "default": (0, 50)})}}
    rows = {s.policy: s for s in summarise(results)}
    assert rows["default"].dominates_race
    assert "0 = race's 0" in markdown(rows.values())


def test_the_summary_can_be_limited_to_the_seeds_every_policy_ran(tmp_path, capsys):
    import json  # noqa: PLC0415

    from django.core.management import call_command  # noqa: PLC0415

    results = tmp_path / "r.json"
    results.write_text(json.dumps({"cells": {
        "a": _cell(11, {"multikueue-race": (600, 100), "default": (300, 90)}),
        "b": _cell(12, {"multikueue-race": (6000, 1000)}),
    }}))  # fmt: skip
    call_command("replay_sweep", "t.csv", "--render-only", "--results", str(results), "--summary-seeds", "11")
    race_row = next(line for line in capsys.readouterr().out.splitlines() if "| multikueue-race |" in line)
    assert "| 10.0 |" in race_row and "| 1 | - |" in race_row


def test_rendering_a_results_file_records_its_presets_wait_estimator_error(db, tmp_path):
    import json  # noqa: PLC0415

    from django.core.management import call_command  # noqa: PLC0415

    from broker.models import ReplayEstimate  # noqa: PLC0415

    old, new = _cell(11, {"multikueue-race": (600, 100), "default": (300, 90)}), _cell(
        12, {"multikueue-race": (600, 100), "default": (300, 90)})
    for cell in (old, new):
        cell["jobs"] = 40
    # a run from before per-destination figures were kept: the overall ones only
    old["policies"]["default"]["extra"] = {"estimator n": 30, "estimator MAE s": 120, "estimator p50 s": 60,
                                           "estimator p90 s": 300, "estimator bias s": -30}
    new["policies"]["default"]["estimator"] = {
        "overall": {"count": 2, "mean_abs_s": 60.0, "p50_abs_s": 0.0, "p90_abs_s": 120.0, "mean_signed_s": 60.0},
        "by_destination": [{"cluster": "onprem-slurm", "pool": "a100-80gb", "count": 2, "mean_abs_s": 60.0,
                            "p50_abs_s": 0.0, "p90_abs_s": 120.0, "mean_signed_s": 60.0}]}
    results = tmp_path / "r.json"
    results.write_text(json.dumps({"window": "second", "cells": {"a": old, "b": new}}))
    call_command("replay_sweep", "--render-only", "--results", str(results))
    rows = {r.seed: r for r in ReplayEstimate.objects.all()}
    assert set(rows) == {11, 12} and {r.policy for r in rows.values()} == {"default"}
    assert rows[11].half == "second" and rows[11].mean_abs_s == 120 and rows[11].by_destination == []
    assert [d.cluster for d in rows[12].report().by_destination] == ["onprem-slurm"]
    call_command("replay_sweep", "t.csv", "--render-only", "--results", str(results))  # again: nothing new
    assert ReplayEstimate.objects.count() == 2


def test_a_sweep_without_a_trace_is_refused_naming_the_argument(db):
    import pytest  # noqa: PLC0415
    from django.core.management import CommandError, call_command  # noqa: PLC0415

    with pytest.raises(CommandError, match="traces: give at least one"):
        call_command("replay_sweep", "--policies", "default")


def test_a_sweep_whose_recording_fails_still_prints_its_summary(db, tmp_path, monkeypatch, capsys):
    import json  # noqa: PLC0415

    from django.core.management import call_command  # noqa: PLC0415
    from django.db import OperationalError  # noqa: PLC0415

    from broker.management.commands import replay_trace  # noqa: PLC0415

    def missing_table(**_):
        raise OperationalError("no such table: broker_replayestimate")

    monkeypatch.setattr(replay_trace, "record_replay_estimates", missing_table)
    cell = _cell(11, {"multikueue-race": (600, 100), "default": (300, 90)})
    cell["jobs"] = 40
    cell["policies"]["default"]["extra"] = {"estimator n": 30, "estimator MAE s": 120, "estimator p50 s": 60,
                                            "estimator p90 s": 300, "estimator bias s": -30}
    results = tmp_path / "r.json"
    results.write_text(json.dumps({"window": "second", "cells": {"a": cell}}))
    call_command("replay_sweep", "--render-only", "--results", str(results))
    said = capsys.readouterr()
    assert "| multikueue-race |" in said.out and "| default |" in said.out
    assert "no such table: broker_replayestimate" in said.err


def test_the_lower_bound_in_a_single_results_file_is_refused_naming_the_option(db, tmp_path):
    import pytest  # noqa: PLC0415
    from django.core.management import CommandError, call_command  # noqa: PLC0415

    with pytest.raises(CommandError, match="--policies: lower-bound .* --results-dir only"):
        call_command(
            "replay_sweep", "t.csv", "--policies", "default,lower-bound", "--results", str(tmp_path / "x.json")
        )
