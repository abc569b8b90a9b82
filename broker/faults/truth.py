"""What the destinations really hold, read around the broker (never through it).

The invariant counters compare the broker's database with this: a duplicate is two
jobs at the destinations carrying one workload id, whatever the broker believes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Iterable, Protocol, Sequence

if TYPE_CHECKING:
    from broker.backends.slurm.transport import SlurmAcct, SlurmJob


@dataclass(frozen=True)
class TruthJob:
    cluster: str
    job_id: str
    workload_id: str | None
    active: bool  # pending or running, and not lost
    gpus: int
    lost: bool = False  # the destination dropped it without a trace


class Truth(Protocol):
    def all_jobs(self) -> list[TruthJob]: ...


def by_workload(jobs: Iterable[TruthJob]) -> dict[str, list[TruthJob]]:
    out: dict[str, list[TruthJob]] = defaultdict(list)
    for job in jobs:
        if job.workload_id:
            out[job.workload_id].append(job)
    return out


class SimTruth:
    """The simulated fleet's own records (lost jobs included)."""

    def __init__(self, cluster_names: Sequence[str]):
        self.cluster_names = list(cluster_names)

    def all_jobs(self) -> list[TruthJob]:
        from broker.backends.sim import SimulatorFleet

        fleet = SimulatorFleet.instance()
        out = []
        for name in self.cluster_names:
            for job in fleet.get(name).jobs():
                out.append(
                    TruthJob(
                        cluster=name,
                        job_id=job.job_id,
                        workload_id=job.workload_id,
                        active=job.active,
                        gpus=job.gpus,
                        lost=job.lost,
                    )
                )
        return out


def truth_of_accounting(cluster: str, rec: SlurmAcct) -> TruthJob:
    """An sacct record as the truth counts it, read with the Slurm backend's own parsers
    (its workload id, state mapping and GPU count), so the two never disagree on a job."""
    from broker.backends.slurm import parsers

    return TruthJob(
        cluster,
        rec.job_id,
        parsers.workload_id_of(rec.name, rec.comment),
        not parsers.map_job_state(rec.state).ended,
        parsers.tres_gpus(rec.alloc_tres) or parsers.tres_gpus(rec.req_tres),
    )


def truth_of_queue(cluster: str, job: SlurmJob) -> TruthJob:
    """An squeue record as the truth counts it (the backend's parsers, as above)."""
    from broker.backends.slurm import parsers

    return TruthJob(
        cluster,
        job.job_id,
        parsers.workload_id_of(job.name, job.comment),
        not parsers.map_job_state(job.state).ended,
        parsers.tres_gpus(job.tres),
    )


class SlurmTruth:
    """squeue and sacct of the real cluster: the jobs that carry a workload id (the
    backend's reading of name and comment) and the foreign jobs the harness injected."""

    def __init__(self, cluster: str, since: datetime, timeout_s: float = 30, transport: Any = None):
        from broker.backends.slurm import CommandTransport

        self.cluster, self.since = cluster, since
        self.transport = transport or CommandTransport(timeout_s=timeout_s)
        self.extra_ids: set[str] = set()  # foreign jobs the harness submitted
        self._last: list[TruthJob] = []

    def all_jobs(self) -> list[TruthJob]:
        """The cluster's jobs; while slurmctld is down (the harness stopped it), the last
        answer: nothing can be submitted, cancelled or ended by anyone in the meantime."""
        from broker.backends.base import Unavailable

        try:
            self._last = self._read()
        except Unavailable:
            pass
        return list(self._last)

    def _read(self) -> list[TruthJob]:
        jobs: dict[str, TruthJob] = {}
        read = [
            truth_of_accounting(self.cluster, r)
            for r in self.transport.accounting(since=self.since - timedelta(minutes=1))
        ]
        read += [truth_of_queue(self.cluster, j) for j in self.transport.jobs()]  # squeue's word is the later one
        for job in read:
            if job.workload_id or job.job_id in self.extra_ids:
                jobs[job.job_id] = job
        return list(jobs.values())


class JournalTruth:
    """The journal destination's table (broker.faults.journal)."""

    def __init__(self, path: str):
        self.path = path

    def all_jobs(self) -> list[TruthJob]:
        from broker.faults.journal import Journal

        return [
            TruthJob(
                cluster=j["cluster"],
                job_id=j["job_id"],
                workload_id=j["workload_id"],
                active=j["state"] in ("pending", "running"),
                gpus=j["gpus"],
            )
            for j in Journal(self.path).all_jobs()
        ]


def utcnow() -> datetime:
    return datetime.now(timezone.utc)
