"""Work the broker does not see: local users' jobs go straight into a cluster's own queue,
the same ones at the same clusters under every policy, and their GPU time is nobody's spend."""
from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from broker.replay.jobs import TimeOptions
from broker.replay.runner import ReplayConfig, load_jobs, replay_run
from broker.fleet_file import load_fleet
from broker.replay.synth import SynthOptions

ROWS = [f"p{i:02d},{i * 30},,G2,{1 + i % 4},1,{1800 + 60 * i},Running" for i in range(40)]


def _config(trace_file, fleet_file, share: float = 0.3, seed: int = 7) -> ReplayConfig:
    return ReplayConfig(trace=trace_file(ROWS), fleet=fleet_file(), synth=SynthOptions(seed=seed, gang_fraction=0.0),
                        time=TimeOptions(time_compress=1.0), local_share=share)


def _homes(run) -> dict[str, tuple[str, float | None]]:
    return {k: (o.cluster, o.job.submit_s) for k, o in run.local_outcomes.items()}


def test_every_policy_meets_the_same_local_jobs_at_the_same_clusters(db, trace_file, fleet_file):
    config = _config(trace_file, fleet_file)
    jobs = load_jobs(config)[1]
    fleet = load_fleet(config.fleet)
    race = replay_run("multikueue-race", jobs, fleet, seed=7)
    first_fit = replay_run("first-fit", jobs, fleet, seed=7)
    assert 5 <= len(race.local_outcomes) <= 20  # about 30% of 40
    assert _homes(race) == _homes(first_fit)
    assert {cluster for cluster, _ in _homes(race).values()} == {"frag", "roomy"}  # every cluster gets some
    assert not set(race.outcomes) & set(race.local_outcomes)  # the policy is scored on its own jobs only


def test_the_local_jobs_gpu_time_is_in_no_policys_cloud_spend(db, trace_file, fleet_file):
    config = _config(trace_file, fleet_file)
    fleet = load_fleet(config.fleet)
    jobs = load_jobs(config)[1]
    run = replay_run("multikueue-race", jobs, fleet, seed=7)
    used_by_policy = sum(gpus * (end - start) for cluster, start, end, gpus in run.usage if cluster == "roomy")
    local_on_cloud = [o for o in run.local_outcomes.values() if o.cluster == "roomy"]
    assert local_on_cloud
    local_seconds = sum(o.job.total_gpus * o.job.duration_s for o in local_on_cloud)
    assert run.gpu_seconds["roomy"] == pytest.approx(used_by_policy - local_seconds)


def test_no_share_means_no_local_jobs_and_another_seed_marks_other_jobs(trace_file, fleet_file):
    assert not any(j.local for j in load_jobs(_config(trace_file, fleet_file, share=0.0))[1])
    marked = {j.key for j in load_jobs(_config(trace_file, fleet_file, seed=7))[1] if j.local}
    other = {j.key for j in load_jobs(_config(trace_file, fleet_file, seed=8))[1] if j.local}
    assert marked and other and marked != other


def test_a_share_of_one_or_more_is_refused_by_name(trace_file, fleet_file):
    with pytest.raises(ValueError, match="local_share"):
        _config(trace_file, fleet_file, share=1.0)


def test_the_command_refuses_a_share_of_one_naming_the_option(trace_file):
    with pytest.raises(CommandError, match="--local-share"):
        call_command("replay_trace", str(trace_file(ROWS)), "--local-share", "1", "--no-record")
