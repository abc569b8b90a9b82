"""The wall-clock pace both real players keep: each submission and cancellation of the job
list at its instant, the control plane sampled in between and after, until every job is
over or the deadline passes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from broker.calibration.jobs import CalibrationJob, JobList

Sleep = Callable[[float], None]
Clock = Callable[[], float]
Act = Callable[[str, CalibrationJob, float], None]  # ("submit" | "cancel", job, seconds since t0)
Sample = Callable[[float], bool]  # (t0) -> True while any job is not yet over


@dataclass(frozen=True)
class Pace:
    clock: Clock
    sleep: Sleep
    sample_s: float  # seconds between two looks at the control plane


def keep_pace(jobs: JobList, pace: Pace, *, act: Act, sample: Sample, deadline_s: float) -> float:
    """Play ``jobs``; returns t0, the clock's reading at the start (what times are taken from)."""
    clock, sleep, sample_s = pace.clock, pace.sleep, pace.sample_s
    events = [(j.at_s, 1, "submit", j) for j in jobs.jobs]
    events += [(float(j.cancel_at_s), 0, "cancel", j) for j in jobs.jobs if j.cancel_at_s is not None]
    t0 = clock()
    for at, _, what, job in sorted(events, key=lambda e: (e[0], e[1])):
        while clock() - t0 < at:
            sample(t0)
            sleep(max(0.0, min(sample_s, at - (clock() - t0))))
        act(what, job, round(clock() - t0, 1))
    while sample(t0) and clock() - t0 < deadline_s:
        sleep(sample_s)
    return t0
