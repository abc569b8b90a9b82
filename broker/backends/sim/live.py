"""The live (pending or running) jobs of one simulated cluster, kept ready for scheduling.

Every submit replays the clock and runs a scheduling pass, and both used to recount
every running job: GPUs in use per pool, the next instant a job ends.  With hundreds of
jobs running on a cluster that was most of a submit's cost, so the figures are kept here
as jobs start and leave instead.  A running job's end is fixed when it starts (its start
instant and run time never change afterwards), which is what the end heap relies on.
"""

from __future__ import annotations

import heapq

from broker.backends.sim.model import PRIORITY_RANK, SimJob


class LiveJobs:
    def __init__(self, share_points: dict[str, float] | None = None, completing_s: float = 0.0) -> None:
        # an ended job keeps its GPUs this much longer (Slurm's COMPLETING)
        self.completing_s = completing_s
        # Slurm's fair share: an account's priority points (none: submission order)
        self.share_points = share_points if share_points is not None else {}
        self.jobs: dict[str, SimJob] = {}  # pending or running, in submission order
        self._pending: dict[str, SimJob] = {}
        self._running: dict[str, SimJob] = {}
        self._pool: dict[str, str] = {}  # running job -> the pool its GPUs are in
        self.used: dict[str, int] = {}  # GPUs of running jobs per pool
        self.by_queue: dict[tuple[str, str], int] = {}  # ... per (pool, Kueue LocalQueue)
        self.by_account: dict[str, int] = {}  # ... per account (Slurm's GrpTRES)
        # (end, seq, job id) of jobs that started; entries of jobs that left since are
        # skipped when they reach the top
        self._ends: list[tuple[float, int, str]] = []
        # (instant, job id) of waiting jobs that may start only from that instant on
        # (Volcano: their pods exist one session after the enqueue); stale entries skipped
        self._wakes: list[tuple[float, str]] = []

    def add(self, job: SimJob) -> None:
        """A new pending job."""
        self.jobs[job.job_id] = self._pending[job.job_id] = job

    def started(self, job: SimJob, pool: str) -> None:
        """A pending job now runs in ``pool`` (its start instant is set)."""
        assert job.ends_at is not None
        del self._pending[job.job_id]
        self._running[job.job_id] = job
        self._pool[job.job_id] = pool
        self.used[pool] = self.used.get(pool, 0) + job.gpus
        key = (pool, job.partition)
        self.by_queue[key] = self.by_queue.get(key, 0) + job.gpus
        self.by_account[job.account] = self.by_account.get(job.account, 0) + job.gpus
        heapq.heappush(self._ends, (job.ends_at + self.completing_s, job.seq, job.job_id))

    def remove(self, job: SimJob) -> None:
        """The job leaves: it ended, was cancelled or vanished (its GPUs are freed)."""
        self.jobs.pop(job.job_id, None)
        self._pending.pop(job.job_id, None)
        if self._running.pop(job.job_id, None) is not None:
            pool = self._pool.pop(job.job_id)
            self.used[pool] -= job.gpus
            self.by_queue[(pool, job.partition)] -= job.gpus
            self.by_account[job.account] -= job.gpus

    def pool_of(self) -> dict[str, str]:
        """Running job -> the pool its GPUs are in."""
        return dict(self._pool)

    def running(self) -> list[SimJob]:
        """Running jobs in submission order."""
        return sorted(self._running.values(), key=_seq)

    def doomed(self) -> list[SimJob]:
        """Running jobs that are to vanish (loses_job), in submission order."""
        return sorted((j for j in self._running.values() if j.doomed), key=_seq)

    def pending(self) -> list[SimJob]:
        """Pending jobs in the order a pass looks at them: priority, the account's fair-share
        points (Slurm's multifactor, as the cluster reported them), then submission."""
        points = self.share_points
        return sorted(
            self._pending.values(),
            key=lambda j: (PRIORITY_RANK.get(j.request.priority, 1), -points.get(j.account, 0.0), j.seq),
        )

    def next_end(self) -> float | None:
        """The earliest instant a running job ends (None when nothing runs)."""
        while self._ends and not self._current(self._ends[0]):
            heapq.heappop(self._ends)
        return self._ends[0][0] if self._ends else None

    def wake_at(self, job: SimJob) -> None:
        """``job`` waits until its ``ready_at``: a pass is due then."""
        heapq.heappush(self._wakes, (job.ready_at, job.job_id))

    def next_event(self, cursor: float) -> float | None:
        """The earliest instant after which a pass may start something: a running job's end
        or (Volcano) a waiting gang's pods coming to exist (``ready_at``).  Kept in a heap, as
        the ends are, so that a cluster with thousands waiting does not scan them each time."""
        while self._wakes and not self._waking(self._wakes[0], cursor):
            heapq.heappop(self._wakes)
        end = self.next_end()
        wake = self._wakes[0][0] if self._wakes else None
        return min((t for t in (end, wake) if t is not None), default=None)

    def _waking(self, entry: tuple[float, str], cursor: float) -> bool:
        """The entry is still ahead and of a job still waiting for it."""
        job = self._pending.get(entry[1])
        return entry[0] > cursor and job is not None and job.ready_at == entry[0]

    def ending_by(self, instant: float) -> list[SimJob]:
        """Running jobs that end at or before ``instant``, in submission order."""
        ending = []
        while self._ends and self._ends[0][0] <= instant:
            entry = heapq.heappop(self._ends)
            if self._current(entry):
                ending.append(self._running[entry[2]])
        return sorted(ending, key=_seq)

    def _current(self, entry: tuple[float, int, str]) -> bool:
        """The entry is of a running job's present run (one evicted and started again has
        a later end; its first run's entry is stale)."""
        job = self._running.get(entry[2])
        return job is not None and job.ends_at is not None and job.ends_at + self.completing_s == entry[0]


def _seq(job: SimJob) -> int:
    return job.seq
