"""The pre-flight GPU check's shell text (``broker.preflight``), run as each backend runs it."""
from __future__ import annotations

import subprocess

import pytest

from broker import preflight
from broker.spec import WorkloadSpec


def _spec(**kw) -> WorkloadSpec:
    return WorkloadSpec(project="p", name="n", command="echo ran", gpus_per_worker=2, workers=2,
                        gpu_models=("A100",), gpu_check=True, **kw)


def _run(shell: str, spec: WorkloadSpec, env: dict[str, str]) -> subprocess.CompletedProcess:
    text = preflight.prelude(spec, rank="${SLURM_NODEID:-0}", node="${SLURMD_NODENAME:-unknown}") + spec.command
    return subprocess.run([shell, "-c", text], capture_output=True, text=True, timeout=10,
                          env={"PATH": "/usr/bin:/bin", "SLURM_NODEID": "1", "SLURMD_NODENAME": "n2", **env})


@pytest.mark.parametrize("shell", ["bash", "sh"])
@pytest.mark.parametrize("env", [{"CUDA_VISIBLE_DEVICES": "0,1"}, {"SLURM_JOB_GPUS": "4,5"},
                                 {"NVIDIA_VISIBLE_DEVICES": "GPU-a,GPU-b"}])
def test_a_worker_that_sees_its_gpus_runs_its_command(shell, env):
    done = _run(shell, _spec(), env)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "ran", "")


@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_a_worker_that_sees_fewer_gpus_says_which_worker_and_node_and_exits_with_the_checks_code(shell):
    done = _run(shell, _spec(), {"CUDA_VISIBLE_DEVICES": "0"})
    assert done.returncode == preflight.CHECK_FAILED_EXIT and done.stdout == ""
    assert done.stderr.strip() == "gpubroker: GPU check failed on worker 1 (node n2): sees 1 GPUs of 2"
    assert preflight.failed_worker(done.stderr) == ("1", "n2", "sees 1 GPUs of 2")


def test_the_workloads_own_check_runs_instead_and_its_failure_is_reported_the_same_way():
    own = _spec(gpu_check_command='[ "$SLURMD_NODENAME" != n2 ]')
    failed = _run("bash", own, {"CUDA_VISIBLE_DEVICES": "0,1"})
    assert failed.returncode == preflight.CHECK_FAILED_EXIT
    assert preflight.failed_worker(failed.stderr) == ("1", "n2", "its gpu_check_command failed")
    assert _run("bash", own, {"SLURMD_NODENAME": "n1"}).stdout.strip() == "ran"


def test_no_check_asked_no_text_and_the_summary_reads_back():
    unchecked = WorkloadSpec(project="p", name="n", command="x", gpu_models=("A100",))
    assert preflight.prelude(unchecked, rank="0", node="n") == ""
    assert preflight.failed_worker(preflight.summary("3", "gpu-7")) == ("3", "gpu-7", "")
    assert preflight.failed_worker("exited with code 86") is None
