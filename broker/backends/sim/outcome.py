"""How simulated jobs end, and the output they print.

The simulator speaks each flavor's words: a Slurm job killed for memory ends in
``OUT_OF_MEMORY``, a Kubernetes pod in ``OOMKilled``; a job past its limit ends in
``TIMEOUT`` or ``DeadlineExceeded``.  The output is synthetic but stable: one line when a
worker starts, one per simulated minute it ran, and one saying how it ended, so paging,
tail and follow have something real to page through.
"""

from __future__ import annotations

from broker import preflight
from broker.backends.base import JobOutcome, JobState, LogPage, exit_words
from broker.backends.sim.model import SimJob

TIMEOUT_RAW = {"slurm": "TIMEOUT", "kueue": "DeadlineExceeded", "volcano": "DeadlineExceeded"}
OOM_RAW = {"slurm": "OUT_OF_MEMORY", "kueue": "OOMKilled", "volcano": "OOMKilled"}
OOM_EXIT_CODE = 137  # 128 + SIGKILL, as the kernel's OOM killer leaves it
MAX_LINES = 100_000  # a simulated job prints at most this many lines per worker
GPU_CHECK_S = 5.0  # nominal seconds a failing pre-flight check runs before the gang ends


def gpu_check_fails(job: SimJob, broken: set[str], check_s: float) -> None:
    """A job that asked for the pre-flight check and was started on a node whose GPUs are
    broken ends, after the check's seconds, failed by the first such worker's check."""
    if not job.request.gpu_check or not broken:
        return
    for worker in range(job.request.workers):
        if worker_node(job, worker) in broken:
            job.run_s, job.final_state = min(job.run_s, check_s), JobState.FAILED
            job.end_raw, job.end_worker, job.exit_code = preflight.END_REASON, str(worker), preflight.CHECK_FAILED_EXIT
            return


def worker_node(job: SimJob, worker: int) -> str:
    """The node that runs worker ``worker`` (0-based): the placement, worker by worker."""
    per_worker = max(1, job.request.gpus_per_worker)
    nodes = [node for node, gpus in job.placement for _ in range(gpus // per_worker)]
    return nodes[worker] if 0 <= worker < len(nodes) else ""


def outcome(job: SimJob, flavor: str) -> JobOutcome | None:
    """The outcome of an ended job in its flavor's words; None while it has not ended."""
    if not job.state.ended:
        return None
    if job.state is JobState.CANCELLED:
        return JobOutcome(summary="cancelled", end_reason=job.end_raw or "CANCELLED")
    if job.state is JobState.PREEMPTED:
        return JobOutcome(summary="preempted by another job", end_reason=job.end_raw or "PREEMPTED")
    if job.end_raw == TIMEOUT_RAW[flavor]:
        return JobOutcome(summary=f"stopped at its time limit ({job.end_raw})", end_reason=job.end_raw)
    if job.end_raw == preflight.END_REASON:
        worker = job.end_worker
        return JobOutcome(
            summary=preflight.summary(worker, worker_node(job, int(worker))),
            end_reason=preflight.END_REASON,
            exit_code=preflight.CHECK_FAILED_EXIT,
            worker=worker,
        )
    if job.end_raw == OOM_RAW[flavor]:
        node = worker_node(job, int(job.end_worker))
        where = f"worker {job.end_worker}" + (f" (node {node})" if node else "")
        return JobOutcome(
            summary=f"ran out of memory on {where}",
            end_reason=job.end_raw,
            exit_code=OOM_EXIT_CODE,
            worker=job.end_worker,
        )
    code = 0 if job.state is JobState.COMPLETED else 1
    if job.exit_code is not None:
        code = job.exit_code
    reason = ("COMPLETED" if code == 0 else "FAILED") if flavor == "slurm" else ("Completed" if code == 0 else "Error")
    return JobOutcome(summary=exit_words(code), end_reason=reason, exit_code=code)


def _lines(job: SimJob, worker: int, run_s: float, flavor: str) -> list[str]:
    if job.started_at is None:
        return []
    node = worker_node(job, worker)
    lines = [f"worker {worker} starting on {node or 'its node'}"]
    minutes = min(int(run_s // 60), MAX_LINES - 2)
    lines += [f"worker {worker} step {k}: loss {1.0 / (k + 1):.4f}" for k in range(1, minutes + 1)]
    end = outcome(job, flavor)
    if end is not None and (not end.worker or end.worker == str(worker)):
        lines.append(f"worker {worker}: {end.summary}")
    return lines


def log_page(
    job: SimJob, flavor: str, run_s: float, *, worker: str, offset: int | None, limit: int, tail: int | None
) -> LogPage:
    """A page of one worker's synthetic output (worker 0 when none is named)."""
    workers = tuple(str(i) for i in range(job.request.workers))
    chosen = worker or "0"
    if chosen not in workers:
        raise ValueError(f"no worker {chosen!r}: the job has workers 0-{len(workers) - 1}")
    lines = _lines(job, int(chosen), run_s, flavor)
    if tail is not None:
        start = max(0, len(lines) - tail)
        return LogPage(lines=tuple(lines[start:]), offset=start, workers=workers, worker=chosen)
    start = offset or 0
    page = lines[start : start + limit]
    return LogPage(lines=tuple(page), offset=start, more=len(lines) > start + limit, workers=workers, worker=chosen)
