"""--target-load (broker/replay/target_load.py): the on-prem nodes scaled, in whole nodes, so
that the busy window's offered GPUs over the on-prem GPUs is as near the target as they allow."""
from __future__ import annotations

import contextlib

import pytest
from django.core.management import CommandError, call_command

from broker.backends.base import JobState
from broker.fleet_file import DEMO_FLEET_PATH, load_fleet
from broker.replay.jobs import ReplayJob
from broker.replay.metrics import offered_load
from broker.replay.target_load import onprem_gpus, onprem_load, parse_targets, scale_to_load

DEMO = load_fleet(DEMO_FLEET_PATH)


def job(key: str, submit: float, gpus: int = 1, workers: int = 1, duration: float = 3600.0) -> ReplayJob:
    return ReplayJob(key=key, submit_s=submit, tenant="t1", gpu_class="a100-80gb", min_memory_gb=80,
                     gpus_per_worker=gpus, workers=workers, duration_s=duration, final_state=JobState.COMPLETED)


# one A100-80GB job a minute for 200 minutes, an hour each (about 60 GPUs offered), and a
# 3 x 8 gang that needs three of onprem-slurm's four 8-GPU nodes
JOBS = [job(f"j{i}", 60.0 * i) for i in range(200)] + [job("gang", 6000.0, gpus=8, workers=3)]


def largest_node(fleet) -> int:
    return max(g.gpus_per_node for c in fleet.clusters if c.location == "onprem" for g in c.node_groups)


@pytest.mark.parametrize("target", [0.3, 0.7, 0.9, 1.1])
def test_the_achieved_load_is_within_one_node_of_the_target(target):
    scaling = scale_to_load(JOBS, DEMO, target)
    wanted_gpus = offered_load(JOBS) / target
    assert abs(scaling.onprem_gpus - wanted_gpus) <= largest_node(DEMO)
    assert scaling.achieved == pytest.approx(onprem_load(JOBS, scaling.fleet))
    assert scaling.onprem_gpus == onprem_gpus(scaling.fleet) and scaling.target == target


def test_a_higher_target_never_gets_more_nodes():
    sizes = [scale_to_load(JOBS, DEMO, t).onprem_gpus for t in (0.3, 0.5, 0.7, 0.9, 1.1)]
    assert sizes == sorted(sizes, reverse=True) and sizes[0] > sizes[-1]


def test_the_fleet_never_shrinks_below_the_largest_gang():
    scaling = scale_to_load(JOBS, DEMO, 50.0)  # wants about one GPU: every group at its floor
    slurm = scaling.fleet.cluster("onprem-slurm").node_groups[0]
    assert slurm.count == 3  # the 3 x 8 gang still packs
    assert all(c.after >= 1 for c in scaling.changes)
    assert scaling.achieved < 50.0  # the floor, said as it is


def test_the_cloud_and_mig_nodes_are_left_as_described():
    scaling = scale_to_load(JOBS, DEMO, 0.5)
    assert scaling.fleet.cluster("cloud-k8s") == DEMO.cluster("cloud-k8s")
    assert scaling.fleet.cluster("onprem-slurm").node_groups[1] == DEMO.cluster("onprem-slurm").node_groups[1]
    assert {c.cluster for c in scaling.changes} == {"onprem-slurm", "onprem-k8s"}


def test_a_kueue_quota_that_covered_every_gpu_still_does():
    scaling = scale_to_load(JOBS, DEMO, 0.3)
    for group in scaling.fleet.cluster("onprem-k8s").node_groups:
        assert group.quota == group.count * group.gpus_per_node


def test_the_words_give_both_loads_and_the_nodes():
    words = scale_to_load(JOBS, DEMO, 0.9).describe()
    assert words.startswith("scaled to target on-prem load 0.90: achieved ")
    assert "onprem-slurm a100-80gb 4->" in words


@pytest.mark.parametrize("raw,message", [("0", "must be positive"), ("-1", "must be positive"),
                                         ("abc", "'abc' is not a number"), ("0.9,", "'' is not a number"),
                                         ("nan", "must be positive")])
def test_a_bad_target_is_refused_naming_the_option(raw, message):
    with pytest.raises(ValueError, match=f"--target-load: .*{message}"):
        parse_targets(raw)
    assert parse_targets("0.7, 0.9,1.1") == [0.7, 0.9, 1.1]


def test_a_target_that_asks_for_an_absurd_fleet_is_refused():
    with pytest.raises(ValueError, match="--target-load: 1e-06 asks for"):
        scale_to_load(JOBS, DEMO, 1e-6)


def test_jobs_without_a_busy_window_cannot_be_scaled_and_say_why():
    with pytest.raises(ValueError, match="--target-load: the jobs offer no GPU time"):
        scale_to_load([job("alone", 0.0)], DEMO, 0.9)


@pytest.fixture
def no_isolation(monkeypatch):
    from broker.management.commands import replay_trace

    monkeypatch.setattr(replay_trace, "isolated_database", contextlib.nullcontext)


TRACE = [f"p{i:02d},{i * 40},,G2,{1 + i % 2},1,{1800 + 97 * i},Succeeded" for i in range(24)]


def test_the_command_runs_each_target_and_prints_the_fleet_it_used(db, no_isolation, trace_file, capsys):
    call_command("replay_trace", str(trace_file(TRACE)), "--fleet", str(DEMO_FLEET_PATH), "--policies",
                 "first-fit", "--target-load", "0.5,2", "--no-record")
    text = capsys.readouterr().out
    assert text.count("| first-fit |") == 4  # one table of figures and one of local jobs per target
    fleet_lines = [line for line in text.splitlines() if line.startswith("Fleet: ")]
    assert "(scaled to target on-prem load 0.50: achieved" in fleet_lines[0]
    assert "(scaled to target on-prem load 2.00: achieved" in fleet_lines[1]


def test_the_command_refuses_a_bad_target_naming_the_option(db, no_isolation, trace_file):
    with pytest.raises(CommandError, match="--target-load: must be positive"):
        call_command("replay_trace", str(trace_file(TRACE)), "--target-load", "-0.9", "--no-record")
