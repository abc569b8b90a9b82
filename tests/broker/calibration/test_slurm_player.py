"""The real side's driver, over a transport that records the commands and answers as
slurmctld does: what it submits (argument lists), how it reads squeue and sacct."""
from __future__ import annotations

import subprocess

from broker.backends.slurm.commands import CommandTransport
from broker.calibration.jobs import parse
from broker.calibration.slurm import SlurmPlayer


class FakeSlurm(CommandTransport):
    """Jobs start when submitted and are gone from the queue after two looks."""

    def __init__(self) -> None:
        super().__init__()
        self.commands: list[list[str]] = []
        self.looks = 0

    def run(self, cmd, *, input=None, timeout=None):
        self.commands.append(list(cmd))
        out = ""
        if cmd[0] == "sinfo":
            out = "slurm-wlm 22.05.8\n"
        elif cmd[0] == "sbatch":
            out = f"{100 + sum(c[0] == 'sbatch' for c in self.commands)};ci\n"
        elif cmd[0] == "squeue":
            self.looks += 1
            out = "101|RUNNING|None\n102|PENDING|Resources\n" if self.looks < 3 else ""
        elif cmd[0] == "sacct":
            out = ("101|1000|1000|1010|COMPLETED|SchedMain\n"
                   "102|1001|1012|1020|COMPLETED|SchedBackfill\n")
        return subprocess.CompletedProcess(cmd, 0, out, "")


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += max(s, 0.5)


def test_the_player_submits_argument_lists_samples_reasons_and_reads_sacct():
    jobs = parse({"name": "two", "jobs": [
        {"name": "a", "at_s": 0, "gpus_per_worker": 8, "run_s": 10, "time_limit_min": 2},
        {"name": "b", "at_s": 1, "gpus_per_worker": 4, "workers": 2, "run_s": 8, "time_limit_min": 1},
    ]})
    slurm, clock = FakeSlurm(), Clock()
    played = SlurmPlayer(slurm, partition="calib", gres_type="a100", clock=clock, sleep=clock.sleep).play(
        jobs, deadline_s=60)
    sbatch = [c for c in slurm.commands if c[0] == "sbatch"]
    assert sbatch[1][:9] == ["sbatch", "--parsable", "-p", "calib", "-J", sbatch[1][5], "-N", "2",
                             "--ntasks-per-node=1"]
    assert "--gres=gpu:a100:4" in sbatch[1] and "--time=1" in sbatch[1] and sbatch[1][-2:] == ["--wrap", "sleep 8"]
    assert played.side == "slurm 22.05.8"
    assert any(r == {"b": "capacity"} for r in played.reasons.values())
    assert (played.jobs["b"].started_s, played.jobs["b"].backfilled) == (12.0, True)
    assert played.jobs["a"].backfilled is False
    assert ["scancel", "101", "102"] in slurm.commands  # nothing left behind


class WarmingSlurm(FakeSlurm):
    """The warm-up job stays in the queue for two looks; the calc period is a minute."""

    def run(self, cmd, *, input=None, timeout=None):
        if cmd[:3] == ["scontrol", "show", "config"]:
            self.commands.append(list(cmd))
            return subprocess.CompletedProcess(cmd, 0, "PriorityCalcPeriod      = 00:01:00\n", "")
        if cmd[0] == "squeue":
            self.commands.append(list(cmd))
            self.looks += 1
            return subprocess.CompletedProcess(cmd, 0, "101\n" if self.looks < 3 else "", "")
        return super().run(cmd, input=input, timeout=timeout)


def test_warm_up_runs_its_jobs_to_the_end_then_waits_one_fair_share_period():
    jobs = parse(
        {
            "name": "fs",
            "warmup": [{"account": "fs-heavy", "nodes": 2, "cpus_per_node": 16, "run_s": 10}],
            "jobs": [{"name": "a", "at_s": 0, "gpus_per_worker": 1, "run_s": 5, "time_limit_min": 1}],
        }
    )
    slurm, clock = WarmingSlurm(), Clock()
    SlurmPlayer(slurm, partition="calib", clock=clock, sleep=clock.sleep).warm_up(jobs.warmup)
    sbatch = next(c for c in slurm.commands if c[0] == "sbatch")
    assert ["-N", "2"] == sbatch[6:8] and "--ntasks-per-node=16" in sbatch and "--account=fs-heavy" in sbatch
    assert sum(c[0] == "squeue" for c in slurm.commands) == 3  # looked until it left the queue
    assert clock.t >= 1000.0 + 2 * 1.0 + 65.0  # then one PriorityCalcPeriod and a margin


def test_a_warm_up_job_that_never_ends_is_cancelled_and_the_run_stops_saying_so():
    import pytest
    from broker.backends.base import Unavailable

    class Stuck(WarmingSlurm):
        def run(self, cmd, *, input=None, timeout=None):
            if cmd[0] == "squeue":
                self.commands.append(list(cmd))
                return subprocess.CompletedProcess(cmd, 0, "101\n", "")
            return super().run(cmd, input=input, timeout=timeout)

    jobs = parse(
        {
            "name": "fs",
            "warmup": [{"account": "fs-heavy", "nodes": 1, "cpus_per_node": 1, "run_s": 10}],
            "jobs": [{"name": "a", "at_s": 0, "gpus_per_worker": 1, "run_s": 5, "time_limit_min": 1}],
        }
    )
    slurm, clock = Stuck(), Clock()
    with pytest.raises(Unavailable, match="warm-up jobs 101 did not end within 30 s"):
        SlurmPlayer(slurm, partition="calib", clock=clock, sleep=clock.sleep).warm_up(jobs.warmup, wait_s=30)
    assert ["scancel", "101"] in slurm.commands
