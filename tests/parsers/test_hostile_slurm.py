"""Hostile input to the Slurm parsers: squeue / sacct / scontrol text, the REST API's JSON
records, and sacct usage files (accounting/sacct.py).  A bad line is skipped and every good
line around it still read; a bad JSON field fails with an error naming that field."""
from __future__ import annotations

import re

from hypothesis import example, given
from hypothesis import strategies as st

from tests.parsers.hostile import (
    FAST, SLURM_FIXTURES, broken, failure, field_name, hostile_text, mangled_lines, names_a_broken_field,
    with_hostile_lines)


def _fixture(name: str) -> str:
    return (SLURM_FIXTURES / name).read_text()


# ------------------------------------------------------------------ squeue

@FAST
@given(hostile_text | mangled_lines(_fixture("squeue-O-us.txt")) | mangled_lines(_fixture("squeue.txt"))
       | with_hostile_lines(_fixture("squeue-O-us.txt")))
def test_squeue_output_gives_jobs_or_skips_the_line(text):
    from broker.backends.slurm import parsers

    untouched = [line for line in _fixture("squeue-O-us.txt").splitlines() if line in text.splitlines()]
    for delimiter in (parsers.US, "|"):
        jobs = parsers.parse_squeue(text, delimiter=delimiter)
        for job in jobs:
            assert isinstance(job.job_id, str) and isinstance(job.num_nodes, int), job
            parsers.map_job_state(job.state)
            parsers.tres_gpus(job.tres)
        if delimiter == parsers.US:  # every real line still in the text still gives its job
            kept = parsers.parse_squeue("\n".join(untouched), delimiter=parsers.US)
            assert len(kept) == len(untouched)
            assert [job for job in jobs if job in kept] == kept


def test_a_cut_squeue_line_is_skipped_and_every_other_job_still_read():
    from broker.backends.slurm import parsers

    lines = _fixture("squeue-O-us.txt").splitlines()
    every = [job.job_id for job in parsers.parse_squeue("\n".join(lines), delimiter=parsers.US)]
    lines[1] = lines[1][:5]  # the second job's line, cut short
    assert [job.job_id for job in parsers.parse_squeue("\n".join(lines), delimiter=parsers.US)] == [
        job_id for job_id in every if job_id != every[1]
    ]


# ------------------------------------------------------------------ sacct

def test_a_garbled_sacct_line_is_skipped_and_every_other_record_still_read():
    from broker.backends.slurm import parsers

    text = _fixture("sacct-P-X.txt")
    every = [rec.job_id for rec in parsers.parse_sacct_table(text)]
    lines = text.splitlines()
    lines[1] = "not|a|sacct|line"
    assert [rec.job_id for rec in parsers.parse_sacct_table("\n".join(lines))] == every[1:]


@FAST
@given(hostile_text | mangled_lines(_fixture("sacct-us.txt")) | mangled_lines(_fixture("sacct-P-X.txt"))
       | with_hostile_lines(_fixture("sacct-P-X.txt"), keep_first=True))
def test_sacct_lines_give_records_or_are_skipped(text):
    from broker.backends.slurm import parsers

    for line in text.splitlines():
        rec = parsers.parse_sacct_line(line)
        assert rec is None or isinstance(rec.job_id, str)
    records = parsers.parse_sacct_table(text)
    for rec in records:
        assert isinstance(rec.elapsed_s, int)
    real = _fixture("sacct-P-X.txt").splitlines()
    if text.splitlines()[:1] == real[:1]:  # the header intact: every real line still there is read
        kept = parsers.parse_sacct_table("\n".join(line for line in real if line in text.splitlines()))
        assert [rec for rec in records if rec in kept] == kept


@FAST
@given(hostile_text | mangled_lines(_fixture("sacct-P-X.txt")))
def test_sacct_usage_file_gives_records_or_says_what_is_missing(text):
    from accounting.sacct import iter_sacct_usage

    try:
        records = list(iter_sacct_usage(text.splitlines(), cluster="hpc"))
    except ValueError as exc:
        header = (text.splitlines() or [""])[0].rstrip("\r\n").split("|")
        named = re.fullmatch(r"sacct output lacks ((?:JobID|Start|AllocTRES)(?:, (?:JobID|Start|AllocTRES))*)",
                             str(exc))
        assert named, f"{exc} names no column"
        assert all(column not in header for column in named.group(1).split(", ")), (str(exc), header)
        return
    for r in records:
        assert r.gpus > 0 and r.gpu_seconds >= 0


def test_a_bad_time_in_a_usage_file_skips_its_line_names_it_and_keeps_the_rest():
    from accounting.sacct import iter_sacct_usage

    lines = _fixture("sacct-P-X.txt").splitlines()
    good = list(iter_sacct_usage(lines, cluster="hpc"))
    row = next(i for i, line in enumerate(lines) if line.startswith(f"{good[0].job_id}|"))
    cols = lines[row].split("|")
    cols[lines[0].split("|").index("End")] = "2024-13-45T99:99:99"
    lines[row] = "|".join(cols)
    problems: list = []
    records = list(iter_sacct_usage(lines, cluster="hpc", problems=problems))
    assert [r.job_id for r in records] == [r.job_id for r in good[1:]]
    assert [str(p) for p in problems] == [f"line {row + 1}: End '2024-13-45T99:99:99' is not readable"]


# ------------------------------------------------------------------ scontrol

@FAST
@given(hostile_text | mangled_lines(_fixture("scontrol-show-node.txt")) | mangled_lines(
    _fixture("scontrol-show-node-d.txt")) | with_hostile_lines(_fixture("scontrol-show-node.txt")))
def test_scontrol_nodes_parse_whatever_the_text(text):
    from broker.backends.slurm import parsers

    nodes = parsers.parse_scontrol_nodes(text)
    for node in nodes:
        parsers.node_health(node)
        parsers.gpu_items(node.gres)
    real = _fixture("scontrol-show-node.txt").splitlines()
    kept = [line for line in real if line in text.splitlines()]
    every = parsers.parse_scontrol_nodes("\n".join(kept))
    assert len(every) == len(kept)
    assert [node for node in nodes if node in every] == every  # every real line still there gives its node


# ------------------------------------------------------------------ the REST API's JSON

def _json_sample(name: str, key: str) -> dict:
    import json

    items = json.loads(_fixture(name))[key]
    return items[0]


@FAST
@given(st.data())
@example(data=None)
def test_slurm_rest_json_records_read_or_fail_clearly(data):
    from broker.backends.slurm import json_records

    if data is None:   # the explicit example: an allocation list holding null
        error = failure(json_records.acct_from_json, {"job_id": 1, "tres": {"allocated": [None]}})
        assert error is not None and str(error).startswith("field tres.allocated[0]: expected an object"), error
        return
    reader, sample = data.draw(st.sampled_from([
        (json_records.job_from_json, _json_sample("rest-jobs.json", "jobs")),
        (json_records.node_from_json, _json_sample("sinfo.json", "nodes")),
        (json_records.acct_from_json, _json_sample("rest-slurmdb-jobs.json", "jobs")),
    ]))
    obj, where = data.draw(broken(sample))
    error = failure(reader, obj)
    broken_fields = [field_name(path) for path in where]
    assert error is None or names_a_broken_field(error, broken_fields), f"{error!r} names none of {broken_fields}"
