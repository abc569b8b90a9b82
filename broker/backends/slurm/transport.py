"""The seam between SlurmBackend and the ways of talking to Slurm.

A transport turns Slurm's answers (command output, REST JSON, and some day pyslurm
objects) into the neutral records below; SlurmBackend maps those onto the broker's
dataclasses.  Two transports exist: ``CommandTransport`` (commands.py: sbatch, squeue,
scontrol, sacct, scancel, sacctmgr, optionally through ``ssh``) and ``RestTransport``
(rest.py: slurmrestd with JWT).  A pyslurm transport would implement the same
protocol; none exists because pyslurm has no release matching Slurm 22.05 (see
docs/slurm.md).

Every method raises ``broker.backends.base.Unavailable`` when Slurm does not answer
usefully, and ``submit`` raises ``Rejected`` when Slurm refused the job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Iterable, Iterator, Mapping, Protocol, Sequence, runtime_checkable

from broker.cluster_report import NodeLevels

if TYPE_CHECKING:  # pragma: no cover
    from broker.backends.slurm.mapping import SubmitRequest


@dataclass(frozen=True)
class GresItem:
    """One entry of a GRES string such as ``gpu:a100:4(S:0-1)``."""

    name: str  # "gpu", "mps", "shard"
    type: str  # "a100", "1g.10gb", "" when untyped
    count: int
    detail: str = ""  # what stood in parentheses: "S:0-1", "IDX:0,2-3"


@dataclass(frozen=True)
class SlurmJob:
    """A job as slurmctld reports it (squeue, REST /jobs)."""

    job_id: str
    name: str
    state: str  # base state, upper case: PENDING, RUNNING, CANCELLED, ...
    reason: str = ""  # raw Slurm reason ("None" when none)
    account: str = ""
    partition: str = ""
    qos: str = ""
    comment: str = ""
    tres: Mapping[str, str] = field(default_factory=dict)  # allocated, else requested
    num_nodes: int = 0
    nodes: tuple[str, ...] = ()
    submitted_at: datetime | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    extra: Mapping[str, str] = field(default_factory=dict)  # fields the parser does not know, raw


@dataclass(frozen=True)
class SlurmNode:
    """A node as slurmctld reports it (scontrol show node, REST /nodes)."""

    name: str
    state: str  # base state, upper case: IDLE, MIXED, DOWN, ...
    flags: frozenset[str] = frozenset()  # DRAIN, NOT_RESPONDING, MAINT, ...
    partitions: tuple[str, ...] = ()
    gres: tuple[GresItem, ...] = ()
    gres_used: tuple[GresItem, ...] | None = None  # None: not reported
    gres_drained: tuple[GresItem, ...] = ()
    cfg_tres: Mapping[str, str] = field(default_factory=dict)
    alloc_tres: Mapping[str, str] = field(default_factory=dict)
    reason: str = ""
    extra: Mapping[str, str] = field(default_factory=dict)  # fields the parser does not know, raw


@dataclass(frozen=True)
class SlurmAcct:
    """One allocation as slurmdbd recorded it (sacct -X, REST /slurmdb/jobs)."""

    job_id: str
    name: str
    account: str
    partition: str
    state: str  # base state: "CANCELLED by 0" -> CANCELLED
    alloc_tres: Mapping[str, str] = field(default_factory=dict)
    req_tres: Mapping[str, str] = field(default_factory=dict)
    elapsed_s: int = 0
    started_at: datetime | None = None
    ended_at: datetime | None = None
    comment: str = ""  # slurmdbd stores the job comment only when the job ends
    nodes: tuple[str, ...] = ()
    user: str = ""  # the user the job ran as (sacct User)
    extra: Mapping[str, str] = field(default_factory=dict)  # fields the parser does not know, raw


@dataclass(frozen=True)
class Association:
    account: str
    user: str = ""  # "" for the account's own association
    cluster: str = ""


@runtime_checkable
class Transport(Protocol):
    """How SlurmBackend reaches one Slurm cluster."""

    name: str  # "cli", "rest", ...

    def submit(self, request: "SubmitRequest") -> str:
        """Submit; return the Slurm job id.  Rejected / Unavailable."""
        ...

    def jobs(
        self,
        *,
        job_ids: Sequence[str] | None = None,
        names: Sequence[str] | None = None,
        states: Iterable[str] | None = None,
    ) -> list[SlurmJob]:
        """Jobs slurmctld still holds (any state unless ``states`` is given).

        Unknown job ids are left out, not an error."""
        ...

    def nodes(self) -> list[SlurmNode]: ...

    def topology(self) -> NodeLevels:
        """node -> its (level, domain) pairs, the widest first; {} where the cluster has no
        topology plugin or the transport cannot read it."""
        ...

    def accounting(
        self,
        *,
        since: datetime | None = None,
        job_ids: Sequence[str] | None = None,
        names: Sequence[str] | None = None,
        every_run: bool = False,
    ) -> Iterator[SlurmAcct]:
        """Allocations from slurmdbd, streamed where the transport can.  May raise
        Unavailable part way through.  ``every_run``: a job that Slurm requeued (preempted
        with PreemptMode=REQUEUE, a node failure) once per run, all under its one job id
        (``sacct --duplicates``); else its latest run only."""
        ...

    def cancel(self, job_id: str) -> None:
        """Ask for cancellation.  A job that already ended or is unknown is not an error."""
        ...

    def associations(self, account: str) -> list[Association]: ...

    def add_account(
        self,
        account: str,
        users: Sequence[str] = (),
        *,
        cluster: str = "",
        description: str = "",
        organization: str = "",
    ) -> None:
        """Create the account and the users' associations (NotImplementedError where the
        transport cannot)."""
        ...
