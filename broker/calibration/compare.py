"""How far the simulator's play of a job list is from the real control plane's.

Per job pair, the order they started in (a pair started within one scheduling cycle of
each other, on either side, counts as tied, so as agreeing); per job, the absolute
difference of start times; which jobs started ahead of a job submitted before them (the
local scheduler's backfill, read the same way on both sides); per sampled instant and
waiting job, whether both sides gave the same reason (a job waiting on one side only is a
disagreement)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from itertools import combinations

from broker.calibration.played import Observed, Played


@dataclass(frozen=True)
class Agreement:
    jobs: int
    started_both: int
    waited: int  # jobs that waited a scheduling cycle or more on the real side
    pairs: int
    pair_order: float  # share of pairs in the same order, ties counted as agreeing
    median_abs_error_s: float
    p95_abs_error_s: float
    reason_samples: int
    reason_agreement: float
    ahead_real: tuple[str, ...]
    ahead_sim: tuple[str, ...]
    backfilled_real: tuple[str, ...]  # the real scheduler's own flag (Slurm: SchedBackfill)
    preempted_real: int = 0  # evictions for higher-priority jobs (Kueue), on each side
    preempted_sim: int = 0
    errors_s: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        out = dict(vars(self))
        out["ahead_real"], out["ahead_sim"] = list(self.ahead_real), list(self.ahead_sim)
        out["backfilled_real"] = list(self.backfilled_real)
        return out


def compare(real: Played, sim: Played, *, cycle_s: float) -> Agreement:
    names = sorted(set(real.jobs) & set(sim.jobs))
    both = [n for n in names if real.jobs[n].started_s is not None and sim.jobs[n].started_s is not None]
    agree = total = 0
    for a, b in combinations(both, 2):
        total += 1
        agree += _same_order(real.jobs[a], real.jobs[b], sim.jobs[a], sim.jobs[b], cycle_s)
    errors = {n: abs(_start(sim.jobs[n]) - _start(real.jobs[n])) for n in both}
    same, samples = _reasons(real, sim)
    waited = [n for n in names if _start(real.jobs[n], default=1e18) - real.jobs[n].submitted_s >= cycle_s]
    return Agreement(
        jobs=len(names),
        started_both=len(both),
        waited=len(waited),
        pairs=total,
        pair_order=agree / total if total else 1.0,
        median_abs_error_s=statistics.median(errors.values()) if errors else 0.0,
        p95_abs_error_s=percentile(list(errors.values()), 0.95),
        reason_samples=samples,
        reason_agreement=same / samples if samples else 1.0,
        ahead_real=started_ahead(real, cycle_s),
        ahead_sim=started_ahead(sim, cycle_s),
        backfilled_real=tuple(sorted(n for n, o in real.jobs.items() if o.backfilled)),
        preempted_real=sum(o.preempted for o in real.jobs.values()),
        preempted_sim=sum(o.preempted for o in sim.jobs.values()),
        errors_s={n: round(e, 1) for n, e in sorted(errors.items())},
    )


def _start(o: Observed, default: float = 0.0) -> float:
    return default if o.started_s is None else o.started_s


def _same_order(ra: Observed, rb: Observed, sa: Observed, sb: Observed, cycle_s: float) -> int:
    real_gap = _start(ra) - _start(rb)
    sim_gap = _start(sa) - _start(sb)
    if abs(real_gap) <= cycle_s or abs(sim_gap) <= cycle_s:
        return 1  # tied on a side: within one cycle, either order is the same scheduling
    return int((real_gap > 0) == (sim_gap > 0))


def started_ahead(played: Played, cycle_s: float) -> tuple[str, ...]:
    """Jobs that started more than a cycle before a job submitted earlier started (or ended
    without starting): they went ahead of the queue's order."""
    jobs = list(played.jobs.values())
    out = []
    for j in jobs:
        if j.started_s is None:
            continue
        for earlier in jobs:
            if earlier.submitted_s >= j.submitted_s or earlier.name == j.name:
                continue
            passed = earlier.started_s if earlier.started_s is not None else earlier.ended_s
            if passed is not None and passed - j.started_s > cycle_s:
                out.append(j.name)
                break
    return tuple(sorted(out))


def _reasons(real: Played, sim: Played) -> tuple[int, int]:
    """(same, compared) over the instants both sides sampled (the simulator samples at the
    real side's instants) and the jobs waiting on either."""
    same = total = 0
    for at, waiting in real.reasons.items():
        theirs = sim.reasons.get(at)
        if theirs is None:
            continue
        for name in set(waiting) | set(theirs):
            total += 1
            same += waiting.get(name) == theirs.get(name)
    return same, total


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def spread(values: list[float]) -> str:
    """'median (min-max)' of repeated runs' figures."""
    if not values:
        return "-"
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"
