"""Slurm's end states, exit codes and output files -> the broker's outcome and log pages,
against the REST replies captured from 22.05 (v0.0.38) and 24.11 (v0.0.40-42)."""
from __future__ import annotations

import json

import pytest

from broker.backends.base import LogsGone
from broker.backends.slurm.commands import CommandTransport
from broker.backends.slurm.config import SlurmConfig
from broker.backends.slurm.factory import slurm_backend_from_config
from broker.backends.slurm.mapping import sbatch_args
from broker.backends.slurm.outcome import end_from_json, outcome, parse_exit_code, parse_sacct_ends
from broker.backends.slurm.output import OutputReader, output_path

from .support import FIXTURES


@pytest.mark.parametrize("state,code,signal,summary", [
    ("FAILED", 3, 0, "exited with code 3"),
    ("COMPLETED", 0, 0, "exited with code 0"),
    ("FAILED", 0, 9, "killed by signal 9"),
    ("TIMEOUT", 0, 15, "stopped at its time limit (TIMEOUT)"),
    ("OUT_OF_MEMORY", 0, 9, "ran out of memory (OUT_OF_MEMORY)"),
    ("NODE_FAIL", None, None, "a node it ran on failed (NODE_FAIL)"),
    ("FAILED", None, None, "failed; Slurm did not say with which exit code"),
])
def test_end_states_read_in_plain_words(state, code, signal, summary):
    end = outcome(state, code, signal, "None")
    assert (end.summary, end.end_reason, end.exit_code, end.detail) == (summary, state, code, "")


def test_sacct_exit_codes_are_code_then_signal():
    assert parse_exit_code("3:0") == (3, 0) and parse_exit_code("0:15") == (0, 15)
    assert parse_exit_code("") == (None, None)
    ends = parse_sacct_ends(["151\x1fFAILED\x1f3:0\x1fNone", "152\x1fCANCELLED by 0\x1f0:15\x1fNone", "bad"])
    assert (ends["151"].state, ends["151"].exit_code) == ("FAILED", 3)
    assert (ends["152"].state, ends["152"].signal) == ("CANCELLED", 15)


@pytest.mark.parametrize("path", ["22.05/rest-v0.0.38-jobs.json", "24.11/rest-v0.0.40-jobs.json",
                                  "24.11/rest-v0.0.41-jobs.json", "24.11/rest-v0.0.42-jobs.json"])
def test_both_versions_rest_jobs_give_state_and_signal(path):
    jobs = {j["job_id"]: j for j in json.loads((FIXTURES / path).read_text())["jobs"]}
    done, killed = end_from_json(jobs[1]), end_from_json(jobs[3])  # captured: 3 was cancelled by TERM
    assert (done.state, done.exit_code, done.signal) == ("COMPLETED", 0, 0)
    assert (killed.state, killed.signal) == ("CANCELLED", 15)


def test_a_raw_wait_status_and_2205s_false_success_record():
    assert end_from_json({"job_id": 7, "job_state": "FAILED", "exit_code": 768}).exit_code == 3
    record = {"job_id": 7, "state": {"current": "FAILED", "reason": "None"},
              "exit_code": {"status": "SUCCESS", "return_code": 0}}  # 22.05 slurmdbd, a job that exited 3
    assert end_from_json(record).exit_code is None


def test_output_goes_to_a_known_file_per_job():
    config = SlurmConfig(output_dir="/scratch/out", workdir="/w")
    assert "--output=/scratch/out/slurm-%j.out" in sbatch_args(_request(config))
    assert output_path(config, "42", "wl-1") == "/scratch/out/slurm-42.out"
    assert output_path(SlurmConfig(workdir="/w"), "42", "wl-1") == "/w/slurm-42.out"
    assert output_path(SlurmConfig(output="%x-%j.log"), "42", "wl-1", rest=True) == "/tmp/wl-1-42.log"


def test_an_output_pattern_the_broker_cannot_resolve_is_a_config_error():
    with pytest.raises(Exception, match="resolve only"):
        slurm_backend_from_config("hpc1", {"output": "/o/%u-%j.out"})


def test_the_reader_tails_pages_and_says_when_the_file_is_gone(tmp_path):
    (tmp_path / "slurm-9.out").write_text("".join(f"line {i}\n" for i in range(1, 26)) + "x" * 5000 + "\n")
    reader = OutputReader(CommandTransport(timeout_s=10))
    path = str(tmp_path / "slurm-9.out")
    tail = reader.read(path, offset=None, limit=0, tail=2)
    assert tail.offset == 24 and tail.lines[0] == "line 25" and len(tail.lines[1]) == 4000
    page = reader.read(path, offset=20, limit=3, tail=None)
    assert page.lines == ("line 21", "line 22", "line 23") and page.more
    assert not reader.read(path, offset=23, limit=5, tail=None).more
    with pytest.raises(LogsGone):
        reader.read(str(tmp_path / "slurm-10.out"), offset=None, limit=0, tail=5)


def test_rest_without_file_access_says_so():
    backend = slurm_backend_from_config("hpc1", {"transport": "rest", "rest_url": "http://s:6820"}, token="t")
    with pytest.raises(Exception, match="serves no files"):
        backend.logs("42", tail=5)


def _request(config: SlurmConfig):
    from broker.backends.base import ProjectIdentity
    from broker.backends.slurm.mapping import build_request
    from broker.spec import WorkloadSpec

    spec = WorkloadSpec(project="p", name="n", command="true", gpus_per_worker=1)
    return build_request(spec, "wl-1", ProjectIdentity(tenant="t", project="p"), config)
