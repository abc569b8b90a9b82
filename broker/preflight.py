"""The pre-flight GPU check: a job is started when its GPUs work, not when its scheduler says so.

A workload that asks (``gpu_check``) runs a check on every worker before its command: by
default, that the worker sees as many GPUs as it asked for (``CUDA_VISIBLE_DEVICES``, else
Slurm's ``SLURM_JOB_GPUS``, else the NVIDIA container runtime's ``NVIDIA_VISIBLE_DEVICES``),
or the workload's own ``gpu_check_command``. The check runs inside the job, so its time counts
against the time limit. A worker whose check fails prints one line naming itself and its node
and exits with ``CHECK_FAILED_EXIT``; the gang then ends (Slurm's ``--kill-on-bad-exit``, a
Job's backoff limit of 0, Volcano's ``PodFailed: TerminateJob``), and the broker places the
job again, not on that node (``broker.services.following.gpu_check``).

Plain data: each backend renders the same shell text with its own way of telling a worker its
rank and node; the line the check prints is read back by ``failed_worker``.
"""

from __future__ import annotations

import re

from broker.spec import WorkloadSpec

CHECK_FAILED_EXIT = 86  # unusual enough not to be a program's own failure
END_REASON = "GPU_CHECK"  # JobOutcome.end_reason where a backend tells the check's failure itself
MARK = "gpubroker: GPU check failed on worker"
_LINE_RE = re.compile(r"(?:gpubroker: )?GPU check failed on worker (\S+) \(node ([^)\s]*)\)(?:: (.*))?")
INIT_CONTAINER = "gpu-check"  # Kubernetes: the check runs as this init container

VISIBLE = '"${CUDA_VISIBLE_DEVICES:-${SLURM_JOB_GPUS:-${NVIDIA_VISIBLE_DEVICES:-}}}"'


def default_check(gpus: int) -> str:
    """The count of GPUs the worker sees equals the request."""
    return f"[ \"$(printf '%s' {VISIBLE} | tr ',' '\\n' | grep -c .)\" -eq {gpus} ]"


def check_text(spec: WorkloadSpec) -> str:
    """The check itself: the workload's command, else the count of visible GPUs."""
    return spec.gpu_check_command or default_check(spec.gpus_per_worker)


def prelude(spec: WorkloadSpec, *, rank: str, node: str) -> str:
    """Shell lines to run before the command on every worker ("" when the spec asks no check).
    ``rank`` and ``node``: shell words that expand to the worker's rank and its node's name."""
    if not spec.gpu_check:
        return ""
    what = "sees $(printf '%s' " + VISIBLE + " | tr ',' '\\n' | grep -c .) GPUs of " + str(spec.gpus_per_worker)
    if spec.gpu_check_command:
        what = "its gpu_check_command failed"
    return (
        f"if ! ( {check_text(spec)} ); then\n"
        f'  echo "{MARK} {rank} (node {node}): {what}" >&2\n'
        f"  exit {CHECK_FAILED_EXIT}\n"
        "fi\n"
    )


def summary(worker: str, node: str) -> str:
    """The words of a failed check, as the job's outcome and the broker say it."""
    return f"GPU check failed on worker {worker} (node {node})"


def failed_worker(text: str) -> tuple[str, str, str] | None:
    """(worker, node, what) from the line a failed check prints (or ``summary``'s words), or
    None if ``text`` has none."""
    found = None
    for match in _LINE_RE.finditer(text):
        found = match
    return (found.group(1), found.group(2), found.group(3) or "") if found else None
