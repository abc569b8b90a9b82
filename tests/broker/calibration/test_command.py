"""manage.py calibrate and calibration_table: refusals that name the option, the replay of a
recorded run by this simulator, and the table made from recorded runs."""
from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from broker.calibration.played import Played
from broker.calibration.simulated import inventory_json, play, simulator_for
from tests.broker.calibration.helpers import SLICE, inventory, shipped
from tests.factories import ClusterFactory


@pytest.mark.django_db
def test_a_cluster_that_is_not_a_registered_slurm_kueue_or_volcano_cluster_is_refused_by_name():
    ClusterFactory(name="cloud", kind="kube")
    for name in ("nope", "cloud"):
        with pytest.raises(CommandError, match=f"--cluster: no Slurm, Kueue or Volcano cluster named '{name}' is"):
            call_command("calibrate", "--cluster", name, "--jobs", str(SLICE))


@pytest.mark.django_db
def test_a_volcano_calibration_without_its_pool_is_refused_naming_the_option(monkeypatch):
    ClusterFactory(name="vc", kind="volcano", config={"kubeconfig": "/nonexistent"})
    with pytest.raises(CommandError, match="--pool: name the GPU pool the jobs ask for"):
        call_command("calibrate", "--cluster", "vc", "--jobs", str(SLICE))


@pytest.mark.django_db
def test_repeat_out_of_range_and_resimulate_without_out_are_refused_by_name(tmp_path):
    ClusterFactory(name="ci", kind="slurm")
    with pytest.raises(CommandError, match="--repeat: between 1 and 20"):
        call_command("calibrate", "--cluster", "ci", "--jobs", str(SLICE), "--repeat", "0")
    with pytest.raises(CommandError, match="--resimulate: say where to write the result with --out"):
        call_command("calibrate", "--resimulate", str(tmp_path / "x.json"), "--jobs", str(SLICE))


def _recorded(tmp_path):
    """A recorded run whose "real" side is a simulator's play (what a run on Slurm writes)."""
    real = play(simulator_for(inventory(), "calib"), shipped(), samples=[5.0, 10.0])
    real.side = "slurm 22.05.8"
    path = tmp_path / "run.json"
    path.write_text(json.dumps({
        "cluster": "ci", "control_plane": "slurm", "partition": "calib", "job_list": "contended-16gpu",
        "scheduler": "bf_interval=2", "cycle_s": 2.0, "commit": "abc1234", "inventory": inventory_json(inventory()),
        "repetitions": [{"agreement": {}, "real": real.to_json(), "simulated": {}}]}))
    return path


def test_resimulate_plays_a_recorded_run_again_and_the_table_shows_it(tmp_path, capsys):
    out = tmp_path / "again.json"
    call_command("calibrate", "--resimulate", str(_recorded(tmp_path)), "--jobs", str(SLICE), "--out", str(out))
    again = json.loads(out.read_text())
    agreement = again["repetitions"][0]["agreement"]
    # the same simulator on both sides: every pair in order, no start error
    assert (agreement["pair_order"], agreement["median_abs_error_s"], agreement["jobs"]) == (1.0, 0.0, 36)
    assert Played.from_json(again["repetitions"][0]["simulated"]).jobs["gang-16"].started_s is not None
    capsys.readouterr()
    call_command("calibration_table", str(out))
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("| control plane | job list | real runs at | simulator at |")
    assert table[2].startswith("| slurm 22.05.8 | contended-16gpu | `abc1234` |")
    assert "| 1.00 (1.00-1.00) | 0.00 (0.00-0.00) |" in table[2]


def test_the_table_names_a_file_it_cannot_read(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(CommandError, match="bad.json"):
        call_command("calibration_table", str(bad))


def test_real_vs_real_compares_each_files_real_runs_with_each_other(tmp_path, capsys):
    path = _recorded(tmp_path)
    data = json.loads(path.read_text())
    data["repetitions"] *= 3  # three identical real runs: they agree with each other fully
    path.write_text(json.dumps(data))
    call_command("calibration_table", "--real-vs-real", str(path))
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("| control plane | job list | real runs at | runs | pairs of runs |")
    assert table[2] == "| slurm 22.05.8 | contended-16gpu | `abc1234` | 3 | 3 | 1.00 (1.00-1.00) | 0.00 (0.00-0.00) |"
