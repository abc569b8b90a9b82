"""Ground truth of a replay: where each job went, when it started, why it did not.

Every strategy reports each destination job it creates (``dispatched``); the tracker
reads the simulator to learn when jobs start and, from the durations the replay set,
when they end.  Jobs start only at instants when something changes at their cluster (a
job ends, arrives or is withdrawn), so checking the pending jobs of exactly those
clusters at exactly those instants sees every start at the moment it happens.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from broker.backends.base import JobState, Reason
from broker.replay.jobs import ReplayJob
from broker.replay.simview import FRAGMENTATION, FleetView


@dataclass(frozen=True)
class Start:
    key: str  # the replay job
    cluster: str
    job_id: str  # the destination job
    at: float  # replay seconds


@dataclass
class Outcome:
    """What happened to one job under one strategy."""

    job: ReplayJob
    start_s: float | None = None
    cluster: str = ""  # where it ran
    rejected: int = 0  # dispatches the destination refused
    issues: list[str] = field(default_factory=list)  # why a dispatch did not start at once
    copies: int = 0  # destination jobs created (the race makes several)
    dispatched_s: float | None = None  # when its first destination job was created
    # cut short by the broker's own preemption (a running job it cancelled), how often, and
    # the GPU-seconds the cut runs held; end_s: when its last run ends (None: never ran)
    preempted: int = 0
    lost_gpu_s: float = 0.0
    end_s: float | None = None

    @property
    def wait_s(self) -> float | None:
        return None if self.start_s is None else self.start_s - self.job.submit_s

    @property
    def held_at_destination(self) -> bool:
        """Sent somewhere and did not start at that instant (a race: on no copy)."""
        return bool(self.issues) and (self.start_s is None or self.start_s != self.dispatched_s)

    @property
    def fragmented(self) -> bool:
        """Held at a destination whose free GPUs, summed, covered it, because the gang
        could not be packed onto its nodes: a placement that failed for fragmentation."""
        return self.held_at_destination and FRAGMENTATION in self.issues


class Tracker:
    def __init__(self, view: FleetView):
        self.view = view
        self.outcomes: dict[str, Outcome] = {}
        self._pending: dict[str, dict[str, str]] = {n: {} for n in view.names}  # job id -> key
        self._ends: list[tuple[float, int, str, str]] = []  # (end, seq, cluster, job id)
        self._seq = 0
        self._gone: set[tuple[str, str]] = set()  # withdrawn while running: no end event
        # per cluster, bumped when GPUs change hands other than by a start at dispatch
        # (an end, a start from the local queue, a withdrawal): what an inventory
        # report taken earlier cannot know
        self._changes: dict[str, int] = dict.fromkeys(view.names, 0)
        # (cluster, job id) of the local users' jobs (broker/replay/local_jobs.py): the
        # harness accepts their starts, and their GPU time is no policy's spend
        self.local_jobs: set[tuple[str, str]] = set()
        # (cluster, job id) -> (key, start) of the jobs running now that a strategy placed
        self._running: dict[tuple[str, str], tuple[str, float]] = {}

    # -- what strategies report ---------------------------------------------------------
    def arrived(self, job: ReplayJob) -> Outcome:
        outcome = self.outcomes[job.key] = Outcome(job)
        return outcome

    def dispatched(self, key: str, cluster: str, job_id: str, now: float) -> Start | None:
        """A destination job now exists for ``key``; returns its Start if it already runs
        (not yet accepted: see ``accept``), else records why it waits there."""
        outcome = self.outcomes[key]
        outcome.copies += 1
        if outcome.dispatched_s is None:
            outcome.dispatched_s = now
        self.view.touch(cluster)
        view = self.view.clusters[cluster].status([job_id]).get(job_id)
        if view is not None and view.state is not JobState.PENDING:
            return Start(key, cluster, job_id, now)
        reason = view.reason if view is not None else Reason.OTHER
        outcome.issues.append(self.view.why_pending(cluster, outcome.job, reason))
        self._pending[cluster][job_id] = key
        return None

    def rejected(self, key: str) -> None:
        self.outcomes[key].rejected += 1

    def accept(self, start: Start) -> None:
        """The strategy keeps this start: the job runs here and will end on time."""
        outcome = self.outcomes[start.key]
        if outcome.start_s is None:
            outcome.start_s, outcome.cluster = start.at, start.cluster
        end = outcome.end_s = start.at + outcome.job.duration_s
        self._running[(start.cluster, start.job_id)] = (start.key, start.at)
        self._seq += 1
        heapq.heappush(self._ends, (end, self._seq, start.cluster, start.job_id))

    def withdraw(self, cluster: str, job_id: str, running: bool) -> None:
        """Cancel a destination job (a race loser); it frees what it held at once."""
        self.view.clusters[cluster].cancel(job_id)
        self._pending[cluster].pop(job_id, None)
        self._running.pop((cluster, job_id), None)
        if running:
            self._gone.add((cluster, job_id))
        self.view.touch(cluster)
        self._changes[cluster] += 1

    def forget(self, cluster: str, job_id: str, now: float | None = None) -> None:
        """A destination job the strategy itself cancelled (the broker's withdrawals): it
        no longer waits there, and a running one has no end to wait for.  A running one cut
        before its end (``now``) was preempted: its job counts the cut and the GPUs' time."""
        self._pending[cluster].pop(job_id, None)
        running = self._running.pop((cluster, job_id), None)
        if running is not None and now is not None:
            key, began = running
            outcome = self.outcomes[key]
            if outcome.end_s is not None and now < outcome.end_s:
                outcome.preempted += 1
                outcome.lost_gpu_s += (now - began) * outcome.job.total_gpus
                outcome.end_s = None  # until it runs again
        self._gone.add((cluster, job_id))
        self.view.touch(cluster)
        self._changes[cluster] += 1

    # -- what the loop asks -------------------------------------------------------------
    def pending_at(self, cluster: str) -> int:
        """The strategy's own destination jobs still waiting at this cluster."""
        return sum((cluster, j) not in self.local_jobs for j in self._pending[cluster])

    def pending(self, local: bool = True) -> int:
        """Destination jobs still waiting at their clusters (``local=False``: the strategy's
        own, without the local users')."""
        if local:
            return sum(len(p) for p in self._pending.values())
        return sum(self.pending_at(c) for c in self._pending)

    def waiting(self) -> dict[str, list[str]]:
        """Per cluster, the destination jobs still waiting there (the local users' included)."""
        return {c: sorted(p) for c, p in self._pending.items() if p}

    def next_end(self) -> float | None:
        while self._ends and (self._ends[0][2], self._ends[0][3]) in self._gone:
            heapq.heappop(self._ends)
        return self._ends[0][0] if self._ends else None

    def pop_ends(self, now: float) -> set[str]:
        """Clusters where jobs ended at or before ``now``."""
        touched: set[str] = set()
        while self._ends and self._ends[0][0] <= now:
            _, _, cluster, job_id = heapq.heappop(self._ends)
            self._running.pop((cluster, job_id), None)
            if (cluster, job_id) not in self._gone:
                touched.add(cluster)
                self.view.touch(cluster)
                self._changes[cluster] += 1
        return touched

    def refresh(self, clusters: set[str], now: float) -> list[Start]:
        """Pending jobs of these clusters that have started (by ``now``)."""
        starts: list[Start] = []
        for cluster in sorted(clusters):
            pending = self._pending[cluster]
            if not pending:
                continue
            views = self.view.clusters[cluster].status(list(pending))
            gone = [j for j, v in views.items() if v.state is JobState.CANCELLED and not v.started_at]
            for job_id in gone:  # withdrawn before it started (the broker cancelled it)
                pending.pop(job_id)
            started = [job_id for job_id in pending if job_id in views and views[job_id].state is not JobState.PENDING]
            for job_id in started:
                # when it started there: the instant itself where the loop steps from event
                # to event, earlier where it steps on the broker's timers
                at = views[job_id].started_at
                when = now if at is None else min(now, self.view.sim.clock.to_seconds(at))
                starts.append(Start(pending.pop(job_id), cluster, job_id, when))
            if started:
                self.view.touch(cluster)
                self._changes[cluster] += 1
        return starts

    def changes(self, cluster: str) -> int:
        return self._changes[cluster]

    def is_local(self, start: Start) -> bool:
        return (start.cluster, start.job_id) in self.local_jobs
