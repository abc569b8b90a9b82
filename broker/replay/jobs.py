"""Trace rows -> the jobs a replay submits: class mapped, time rebased and compressed.

Time handling (stated in every table header):

* arrivals: the first row's submit time becomes 0, and gaps between arrivals are divided
  by ``time_compress``.  The dev trace is light for its cluster (about 13 busy GPUs on
  average in its busy window, gangs added and durations capped), so compressing arrivals
  is what puts a comparable load on a ~100-GPU fleet; durations are *not* compressed, so a job runs as long as
  it did in the trace (up to the cap) and waits are in real seconds of the replay.
  Arrivals are rounded to whole seconds;
* durations: capped at ``max_duration_s``.  A few pods ran for months (they were still
  up when the trace ended); uncapped they would hold GPUs for the whole replay.

Rows that cannot be replayed are skipped and counted: CPU-only rows (0 GPUs), rows with
no duration (pods the trace never saw start), and GPU types the mapping does not know.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from broker.backends.base import JobState
from broker.placement.policy import GpuClass
from broker.replay.gpu_map import UnknownGpuType, class_for
from broker.replay.trace import TraceRow

MAX_TIME_LIMIT_MIN = 60 * 24 * 30  # the spec's upper bound on time_limit_minutes
# the replay's tenants (and so its rows) carry this slug prefix: real history excludes them
TENANT_PREFIX = "replay-"
_NAME_BAD = re.compile(r"[^a-z0-9-]+")
_FINAL = {"failed": JobState.FAILED}  # every other trace status ends as completed


@dataclass(frozen=True)
class TimeOptions:
    time_compress: float = 1.0  # arrivals X times denser; durations unchanged
    max_duration_s: float = 86400.0  # cap on a job's run time

    def __post_init__(self) -> None:
        if self.time_compress <= 0:
            raise ValueError("time_compress: must be positive")
        if not 0 < self.max_duration_s <= (MAX_TIME_LIMIT_MIN - 60) * 60:
            raise ValueError("max_duration_s: must be positive and under 30 days")

    def describe(self) -> str:
        return (
            f"arrivals compressed x{self.time_compress:g}, durations capped at "
            f"{self.max_duration_s / 3600:g} h (not compressed)"
        )


@dataclass(frozen=True)
class ReplayJob:
    key: str  # the trace's job id: unique within the replay
    submit_s: float  # replay seconds
    tenant: str
    gpu_class: str
    min_memory_gb: int
    gpus_per_worker: int
    workers: int
    duration_s: float
    final_state: JobState = JobState.COMPLETED
    # submitted by a local user straight into one cluster's own queue: the broker never
    # sees it, every policy meets it (broker/replay/local_jobs.py)
    local: bool = False
    # a fleet priority class of the policy ("": none, which is normal; replay/priorities.py)
    priority_class: str = ""

    @property
    def total_gpus(self) -> int:
        return self.gpus_per_worker * self.workers

    @property
    def name(self) -> str:
        """The trace id as a workload name (lower case, digits, '-', at most 52)."""
        name = _NAME_BAD.sub("-", self.key.lower()).strip("-")[:52].strip("-")
        return name or "job"

    def spec_data(self) -> dict[str, Any]:
        """The workload spec a researcher would have submitted for this job.

        The time limit is the run time rounded up to whole hours, as users pick limits;
        it never cuts a job short.  Gangs do not ask for one interconnect domain: the
        trace says nothing about it, and the demo fleet's L4 nodes declare none."""
        hours = max(1, math.ceil(self.duration_s / 3600))
        return {
            "name": self.name,
            "command": "replay",
            "gpu_class": self.gpu_class,
            "gpus_per_worker": self.gpus_per_worker,
            "workers": self.workers,
            "min_gpu_memory_gb": self.min_memory_gb,
            "time_limit_minutes": min(hours * 60, MAX_TIME_LIMIT_MIN),
            **({"priority_class": self.priority_class} if self.priority_class else {}),
        }


@dataclass
class Skipped:
    cpu_only: int = 0
    no_duration: int = 0
    unknown_gpu: Counter = field(default_factory=Counter)
    capped: int = 0  # replayed, with the duration cut to the cap

    def describe(self) -> str:
        parts = [f"{self.cpu_only} CPU-only", f"{self.no_duration} never started in the trace"]
        if self.unknown_gpu:
            parts.append(f"{sum(self.unknown_gpu.values())} unknown GPU type ({', '.join(sorted(self.unknown_gpu))})")
        return "skipped " + ", ".join(parts) + f"; {self.capped} durations capped"


def prepare(
    rows: Sequence[TraceRow], classes: Mapping[str, GpuClass], options: TimeOptions
) -> tuple[list[ReplayJob], Skipped]:
    """Replayable jobs in arrival order (ties in trace order), and what was skipped."""
    skipped = Skipped()
    if not rows:
        return [], skipped
    origin = min(r.submit_time_s for r in rows)
    jobs: list[ReplayJob] = []
    for row in sorted(rows, key=lambda r: (r.submit_time_s, r.line)):
        job = _job(row, origin, classes, options, skipped)
        if job is not None:
            jobs.append(job)
    return jobs, skipped


def _job(
    row: TraceRow, origin: int, classes: Mapping[str, GpuClass], options: TimeOptions, skipped: Skipped
) -> ReplayJob | None:
    if row.gpus_per_worker == 0:
        skipped.cpu_only += 1
        return None
    if row.duration_s is None:
        skipped.no_duration += 1
        return None
    try:
        gpu_class = class_for(row.gpu_types)
    except UnknownGpuType as exc:
        skipped.unknown_gpu[str(exc.args[0])] += 1
        return None
    if gpu_class not in classes:
        raise ValueError(f"GPU class {gpu_class!r} (trace line {row.line}) is not in the policy")
    duration = float(row.duration_s)
    if duration > options.max_duration_s:
        duration, skipped.capped = float(int(options.max_duration_s)), skipped.capped + 1
    return ReplayJob(
        # whole seconds: every simulated instant stays an exact float, so a job's end
        # computed here is the very instant the simulator ends it
        key=row.job_id,
        submit_s=float(round((row.submit_time_s - origin) / options.time_compress)),
        tenant=row.tenant,
        gpu_class=gpu_class,
        min_memory_gb=classes[gpu_class].min_memory_gb,
        gpus_per_worker=row.gpus_per_worker,
        workers=row.workers,
        duration_s=duration,
        final_state=_FINAL.get(row.status.lower(), JobState.COMPLETED),
    )
