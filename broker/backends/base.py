"""The backend contract: one protocol every control plane module implements.

Backends speak in these plain dataclasses and never touch the ORM; the broker's
services translate between them and the database.  Transient failure
(``Unavailable``) and a local verdict (``Rejected``) are different exceptions,
because the broker must retry the first and move on after the second.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Iterator, Protocol, Sequence, runtime_checkable

# the inventory types are shared with placement; importing them here keeps one name for each
from broker.cluster_report import InventorySnapshot as InventorySnapshot
from broker.cluster_report import NodeInventory as NodeInventory
from broker.cluster_report import PoolInventory as PoolInventory
from broker.cluster_report import QueueStats as QueueStats
from broker.spec import WorkloadSpec


class BackendError(Exception):
    """Base for everything a backend raises on purpose."""


class Unavailable(BackendError):
    """The control plane did not answer usefully (timeout, connection, 5xx).

    Nothing is known about the outcome: callers look the workload up before retrying.
    """


class Rejected(BackendError):
    """The control plane answered and refused the job; retrying the same place won't help."""

    def __init__(self, reason: str, raw: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.raw = raw or reason


class JobState(str, enum.Enum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    # ended by the local scheduler's preemption, and not queued again there (Slurm's
    # PREEMPTED under PreemptMode=CANCEL); a job its scheduler queues again reports PENDING
    PREEMPTED = "preempted"
    UNKNOWN = "unknown"

    @property
    def ended(self) -> bool:
        return self in (JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.PREEMPTED)


class Reason(str, enum.Enum):
    """Why a job waits, normalised across control planes (the raw text is kept beside)."""

    NONE = "none"
    POLICY = "policy"  # quota / QoS / association limit: waiting won't help by itself
    CAPACITY = "capacity"  # not enough free GPUs right now
    GANG = "gang"  # part of the gang fits, waiting for all members
    HELD = "held"  # held by the user or an admin
    UNAVAILABLE = "unavailable"  # partition down, queue inactive or closed, nodes unavailable
    WAITING = "waiting"  # dependency, begin time
    OTHER = "other"


@dataclass(frozen=True)
class ProjectIdentity:
    """The one identity mapping of a project onto every control plane."""

    tenant: str
    project: str
    slurm_account: str = ""
    k8s_namespace: str = ""
    cost_centre: str = ""
    queue: str = ""  # Kueue LocalQueue / Volcano Queue name; empty: backend default
    # The person's own cluster identity, when the project's jobs run as the person:
    # Slurm submits as run_as_user (sbatch --uid/--gid, or slurmrestd impersonation);
    # Kubernetes requests impersonate k8s_user.  run_as_person with no run_as_user
    # means the person has no identity, and a Slurm backend refuses the job.
    run_as_person: bool = False
    run_as_user: str = ""
    run_as_group: str = ""
    k8s_user: str = ""


@dataclass(frozen=True)
class JobOutcome:
    """How an ended job ended, as its scheduler tells it.  Each backend module maps its
    scheduler's words (Slurm State/ExitCode/Reason, a pod's termination reason, a Volcano
    job's phase) onto these fields and writes the plain-words summary itself."""

    summary: str  # "exited with code 3", "ran out of memory on worker 3"
    end_reason: str = ""  # the scheduler's own word: TIMEOUT, OOMKilled, Failed
    exit_code: int | None = None
    signal: int | None = None
    worker: str = ""  # the worker whose end ended the job, when one did
    detail: str = ""  # the scheduler's further text (Slurm Reason, pod message)


class LogsGone(BackendError):
    """The destination no longer has the job's output (deleted pod, removed file)."""


@dataclass(frozen=True)
class LogPage:
    """Lines of a job's output: ``offset`` is the 0-based number of the first line."""

    lines: tuple[str, ...]
    offset: int
    more: bool = False  # lines exist past this page (paged reads)
    workers: tuple[str, ...] = ()  # the workers whose output can be read, when per worker
    worker: str = ""


@dataclass(frozen=True)
class DestinationJob:
    job_id: str
    workload_id: str | None
    state: JobState
    reason: Reason = Reason.NONE
    raw_reason: str = ""
    gpus: int = 0
    nodes: tuple[str, ...] = ()
    started_at: datetime | None = None
    ended_at: datetime | None = None
    worker_cluster: str = ""  # MultiKueue: which worker cluster took the job
    # The job's elapsed run time as the cluster reports it, when it reports one; it wins
    # over ended_at - started_at (a time-compressed simulation reports simulated time).
    run_s: float | None = None
    outcome: JobOutcome | None = None  # once ended, when the backend can tell


@dataclass(frozen=True)
class UsageRecord:
    """GPU-seconds of one job as its scheduler recorded them."""

    source: str  # "slurm", "kueue", "volcano", "simulator"
    cluster: str
    job_id: str
    workload_id: str | None
    account: str  # Slurm account or Kubernetes namespace: maps to a project
    gpu_model: str
    gpus: int
    start: datetime
    end: datetime | None
    gpu_seconds: int
    state: str = ""
    user: str = ""  # the cluster user the job ran as (Slurm's User), when known


@runtime_checkable
class Backend(Protocol):
    """One control plane.  Every call is bounded by a timeout and raises
    ``Unavailable`` when the control plane does not answer."""

    kind: str
    cluster: str

    def inventory(self) -> InventorySnapshot: ...

    def submit(self, spec: WorkloadSpec, workload_id: str, identity: ProjectIdentity) -> str:
        """Create the job carrying ``workload_id``; return the destination job id.

        Raises Rejected (local verdict) or Unavailable (outcome unknown)."""
        ...

    def find(self, workload_id: str) -> DestinationJob | None:
        """The idempotency look-up: the job that carries ``workload_id``, if any."""
        ...

    def status(self, job_ids: Sequence[str]) -> dict[str, DestinationJob]:
        """Current state of these jobs; a job the cluster no longer reports is absent."""
        ...

    def active_jobs(self) -> list[DestinationJob]:
        """Every pending or running GPU job the control plane knows, ours or not."""
        ...

    def cancel(self, job_id: str) -> bool:
        """Ask the control plane to cancel; True when it confirms the job has ended."""
        ...

    def usage(self, since: datetime) -> Iterator[UsageRecord]:
        """Ended (or running, with end=None) jobs' GPU-seconds since ``since``."""
        ...


@runtime_checkable
class LogReader(Protocol):
    """A backend that can read a job's output.  Not part of ``Backend``: a control plane
    without it answers the log page with a plain "not readable here"."""

    def logs(
        self, job_id: str, *, worker: str = "", offset: int | None = None, limit: int = 200, tail: int | None = None
    ) -> LogPage:
        """``tail``: the last ``tail`` lines; else ``limit`` lines from ``offset``.
        Raises LogsGone when the output is no longer there, Unavailable when the
        control plane does not answer."""
        ...


def exit_words(exit_code: int | None, signal: int | None = None) -> str:
    """The plain words of a process's end."""
    if signal:
        return f"killed by signal {signal}"
    if exit_code is None:
        return "ended"
    return f"exited with code {exit_code}"


WORKLOAD_ID_PREFIX = "wl-"
