"""What the destinations really hold, read around the broker (never through it).

The invariant counters compare the broker's database with this: a duplicate is two
jobs at the destinations carrying one workload id, whatever the broker believes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Iterable, Protocol, Sequence


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


class SlurmTruth:
    """squeue and sacct of the real cluster, for the jobs whose name starts with
    ``prefix`` (the harness's workload ids) or that it injected itself."""

    def __init__(self, cluster: str, since: datetime, prefixes: Sequence[str] = ("wl-",), timeout_s: float = 30):
        from broker.backends.slurm import CommandTransport

        self.cluster, self.since, self.prefixes = cluster, since, tuple(prefixes)
        self.transport = CommandTransport(timeout_s=timeout_s)
        self.extra_ids: set[str] = set()  # foreign jobs the harness submitted
        self._last: list[TruthJob] = []

    def _mine(self, name: str, comment: str, job_id: str) -> str | None:
        for text in (comment, name):
            if text and text.startswith(self.prefixes):
                return text
        return None

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
        from broker.backends.slurm import parsers

        jobs: dict[str, TruthJob] = {}
        for rec in self.transport.accounting(since=self.since - timedelta(minutes=1)):
            wid = self._mine(rec.name, rec.comment, rec.job_id)
            if wid is None and rec.job_id not in self.extra_ids:
                continue
            state = parsers.map_job_state(rec.state)
            jobs[rec.job_id] = TruthJob(
                self.cluster,
                rec.job_id,
                wid,
                not state.ended,
                parsers.tres_gpus(rec.alloc_tres) or parsers.tres_gpus(rec.req_tres),
            )
        for job in self.transport.jobs():
            wid = self._mine(job.name, job.comment, job.job_id)
            if wid is None and job.job_id not in self.extra_ids:
                continue
            state = parsers.map_job_state(job.state)
            jobs[job.job_id] = TruthJob(self.cluster, job.job_id, wid, not state.ended, parsers.tres_gpus(job.tres))
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
