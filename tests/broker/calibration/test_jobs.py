"""The calibration's job list: what the shipped slice holds, and errors that name the job
and the field."""
from __future__ import annotations

import pytest

from broker.calibration.jobs import JobListError, parse
from tests.broker.calibration.helpers import shipped


def test_the_shipped_slice_has_gangs_cancellations_local_jobs_and_a_job_past_its_limit():
    jobs = shipped().jobs
    assert 30 <= len(jobs) <= 40
    assert sum(j.cancel_at_s is not None for j in jobs) == 3 and sum(j.local for j in jobs) == 4
    assert any(j.workers > 1 for j in jobs) and any(j.gpus == 16 for j in jobs)
    assert [j.name for j in jobs if j.run_s > j.time_limit_min * 60] == ["overrun"]
    assert [j.at_s for j in jobs] == sorted(j.at_s for j in jobs)


def _one(**job) -> dict:
    return {"name": "t", "jobs": [{"name": "a", "at_s": 0, "gpus_per_worker": 1, "run_s": 5, "time_limit_min": 1, **job}]}


@pytest.mark.parametrize(("job", "says"), [
    ({"gpu": 2}, "job 1 (a): unknown field(s) gpu"),
    ({"run_s": "5"}, "job 1 (a): run_s must be a number, not '5'"),
    ({"workers": 1.5}, "job 1 (a): workers must be a whole number"),
    ({"time_limit_min": 0}, "job 1 (a): time_limit_min must be at least 1"),
    ({"cancel_at_s": 0}, "job 1 (a): cancel_at_s must come after at_s"),
    ({"local": "yes"}, "job 1 (a): local must be true or false"),
    ({"name": "a b"}, "job 1 (a b): name must be letters, digits, - or _"),
    ({"mig_profile": "half"}, "job 1 (a): mig_profile must be a MIG profile such as 1g.5gb, not 'half'"),
])
def test_a_bad_job_is_refused_naming_the_job_and_the_field(job, says):
    with pytest.raises(JobListError) as refused:
        parse(_one(**job), where="slice.json")
    assert str(refused.value) == f"slice.json: {says}" or str(refused.value).startswith(f"slice.json: {says}")


def test_a_missing_field_and_a_repeated_name_are_refused_by_name():
    with pytest.raises(JobListError, match=r"job 1 \(a\): missing run_s"):
        parse({"jobs": [{"name": "a", "at_s": 0, "gpus_per_worker": 1, "time_limit_min": 1}]})
    twice = _one()
    twice["jobs"].append(dict(twice["jobs"][0]))
    with pytest.raises(JobListError, match="job names must be unique: a"):
        parse(twice)


def test_a_good_list_yields_its_jobs_in_submission_order():
    data = {"jobs": [
        {"name": "late", "at_s": 9, "gpus_per_worker": 2, "workers": 2, "run_s": 5, "time_limit_min": 1},
        {"name": "early", "at_s": 1, "gpus_per_worker": 1, "run_s": 5, "time_limit_min": 1, "local": True},
    ]}
    jobs = parse(data).jobs
    assert [(j.name, j.gpus, j.local) for j in jobs] == [("early", 1, True), ("late", 4, False)]


@pytest.mark.parametrize(
    ("warmup", "says"),
    [
        ({"account": "fs-heavy", "nodes": 1, "cpus_per_node": 1}, "warmup job 1: missing run_s"),
        (
            {"account": "fs-heavy", "nodes": 1, "cpus_per_node": 1, "run_s": 5, "gpus": 1},
            "warmup job 1: unknown field(s) gpus",
        ),
        ({"account": "fs heavy", "nodes": 1, "cpus_per_node": 1, "run_s": 5}, "warmup job 1: account must be letters"),
        ({"account": "fs-heavy", "nodes": 0, "cpus_per_node": 1, "run_s": 5}, "warmup job 1: nodes must be at least 1"),
    ],
)
def test_a_bad_warm_up_job_is_refused_naming_the_field(warmup, says):
    data = _one()
    data["warmup"] = [warmup]
    with pytest.raises(JobListError) as refused:
        parse(data, where="fs.json")
    assert str(refused.value).startswith(f"fs.json: {says}")


def test_the_shipped_fair_share_list_warms_up_the_heavy_account_and_asks_past_the_partitions_maxtime():
    from pathlib import Path

    from broker.calibration.jobs import load

    jobs = load(Path(__file__).parent / "data" / "slurm-fairshare-16gpu.json")
    assert [(w.account, w.nodes * w.cpus_per_node) for w in jobs.warmup] == [("fs-heavy", 32)]
    assert {j.account for j in jobs.jobs} == {"fs-heavy", "fs-light"}
    assert [j.name for j in jobs.jobs if j.time_limit_min > 10] == ["p16"]  # calib's MaxTime=10
