"""The replay loop: one strategy, one fresh simulated fleet, time driven by events.

The simulator runs on a manual clock.  The loop jumps from event to event (the next
arrival, or the next job end), and at each instant does, in this order:

1. move the clock there: the simulator ends jobs and starts what their GPUs let start;
2. settle: the tracker looks at the clusters where something ended and reports the
   starts; the strategy accepts them (a race withdraws the other copies, which may let
   more jobs start at the same instant, so this repeats until nothing changes);
3. step: the strategy places what waits at the broker (oldest first), then the jobs
   arriving now (in trace order); their starts are settled the same way.

Nothing can start between two events, since only an end, an arrival or a withdrawal
changes a cluster, so every start is seen at the instant it happens.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Protocol, Sequence

from broker.backends.sim import SimulatorFleet
from broker.replay.jobs import ReplayJob
from broker.replay.simview import FleetView
from broker.replay.local_jobs import inject, local_figures
from broker.replay.tracker import Outcome, Start, Tracker
from broker.placement.wait_estimator import EstimatorReport


@dataclass
class ReplayEnv:
    """What a strategy works with during one replay."""

    sim: SimulatorFleet
    view: FleetView
    tracker: Tracker
    rng: random.Random  # for the strategies' own random choices (race ties)
    seed: int = 0  # the replay's seed: which local jobs go where (broker/replay/local_jobs.py)

    @property
    def now_s(self) -> float:
        return self.sim.clock.seconds


class Strategy(Protocol):
    name: str

    def begin(self, env: ReplayEnv) -> None:
        """Before the first event."""

    def step(self, now: float, arrivals: Sequence[ReplayJob]) -> tuple[list[Start], set[str]]:
        """Place what waits, then the arrivals.  Returns the destination jobs that
        started and are not yet accepted, and the clusters where jobs were withdrawn."""

    def on_started(self, starts: Sequence[Start], now: float) -> set[str]:
        """Accept (or withdraw) these starts; return clusters changed by withdrawals."""

    def finish(self, now: float) -> dict[str, int]:
        """After the last event; extra counters for the report."""


@dataclass
class ReplayRun:
    strategy: str
    outcomes: dict[str, Outcome]
    end_s: float
    gpu_seconds: dict[str, float] = field(default_factory=dict)  # per cluster, from usage
    # (cluster, start, end, GPUs) of every job that used GPU time
    usage: list[tuple[str, float, float, int]] = field(default_factory=list)
    extra: dict[str, int] = field(default_factory=dict)
    estimator: EstimatorReport | None = None  # the broker's wait estimator against what followed
    local_outcomes: dict[str, Outcome] = field(default_factory=dict)  # the local users' jobs
    # per cluster: the elastic pools' billed GPU-seconds no job used (provisioning, idle
    # tails), the strategy's share of them (its share of the cluster's GPU time)
    idle_gpu_seconds: dict[str, float] = field(default_factory=dict)


# The overall estimator figures as the report's extra counters (whole seconds) and the
# sweep's results file keeps them: ErrorSummary field -> counter name.
ESTIMATOR_EXTRAS = {
    "count": "estimator n",
    "mean_abs_s": "estimator MAE s",
    "p50_abs_s": "estimator p50 s",
    "p90_abs_s": "estimator p90 s",
    "mean_signed_s": "estimator bias s",
}


def run_replay(jobs: Sequence[ReplayJob], strategy: Strategy, env: ReplayEnv) -> ReplayRun:
    """Replay ``jobs`` (sorted by submit_s) through ``strategy`` until nothing is left."""
    tracker = env.tracker
    strategy.begin(env)
    i, now = 0, env.now_s
    while True:
        wake = getattr(strategy, "next_wake", None)  # a strategy with timers of its own
        upcoming = [
            t
            for t in (jobs[i].submit_s if i < len(jobs) else None, tracker.next_end(), wake() if wake else None)
            if t is not None
        ]
        if not upcoming:
            break
        now = max(min(upcoming), now)
        env.sim.clock.advance_to(now)
        env.sim.tick()
        _settle(strategy, tracker, [], tracker.pop_ends(now), now)
        arrivals: list[ReplayJob] = []
        local: list[Start] = []
        while i < len(jobs) and jobs[i].submit_s <= now:
            if jobs[i].local:  # straight into its cluster's queue: no strategy hears of it
                local += [s for s in [inject(env.view, tracker, jobs[i], env.seed, now)] if s is not None]
            else:
                tracker.arrived(jobs[i])
                arrivals.append(jobs[i])
            i += 1
        _settle(strategy, tracker, local, set(), now)
        _settle(strategy, tracker, *strategy.step(now, arrivals), now)
    run = collect_run(strategy.name, env, now, strategy.finish(now))
    # only the broker's presets predict waits (like next_wake, an attribute some have)
    run.estimator = getattr(strategy, "estimator", None)
    return run


def _settle(strategy: Strategy, tracker: Tracker, starts: list[Start], touched: set[str], now: float) -> None:
    while starts or touched:
        starts = starts + tracker.refresh(touched, now)
        for start in [s for s in starts if tracker.is_local(s)]:
            tracker.accept(start)  # a local user's job: the harness's, not the strategy's
        starts = [s for s in starts if not tracker.is_local(s)]
        touched = strategy.on_started(starts, now) if starts else set()
        starts = []


def collect_run(name: str, env: ReplayEnv, end_s: float, extra: dict[str, int]) -> ReplayRun:
    """GPU time from the simulator's own accounting, as the schedulers record it."""
    clock = env.sim.clock
    every = env.tracker.outcomes
    run = ReplayRun(
        strategy=name,
        outcomes={k: o for k, o in every.items() if not o.job.local},
        end_s=end_s,
        extra={**extra, **local_figures(every.values())},
        local_outcomes={k: o for k, o in every.items() if o.job.local},
    )
    for cluster_name, cluster in env.view.clusters.items():
        total = everyone = 0.0
        for record in cluster.usage(clock.origin):
            everyone += record.gpu_seconds
            # the local users' GPU time is in the utilisation, not in any policy's spend
            if (cluster_name, record.job_id) not in env.tracker.local_jobs:
                total += record.gpu_seconds
            if record.gpu_seconds:
                end = record.end or clock.now()
                run.usage.append((cluster_name, clock.to_seconds(record.start), clock.to_seconds(end), record.gpus))
        run.gpu_seconds[cluster_name] = total
        idle = cluster.idle_billed_gpu_seconds()
        if idle and everyone:
            run.idle_gpu_seconds[cluster_name] = idle * total / everyone
    return run
