"""Queue-wait estimates learned from what the clusters did (pure: no ORM, no clock).

Per cluster x pool (the GPU class a job asked for), from the broker's own records:

* the observed destination waits (start - dispatch), as an exponentially decayed mean:
  a wait seen one half-life ago counts half as much as one seen now;
* the start rate: GPUs started per second, decayed the same way (the sum of decayed
  GPUs over the decay's time constant), which is how fast that queue drains.

A job that would find ``pending_gpus`` queued ahead of it waits about
``(pending_gpus + its own GPUs) / start rate``, and never less than what jobs sent there
recently waited.  With no observation yet the estimate falls back to the caller's prior
(the old fixed ``assumed_job_hours`` model), so a new cluster is not taken for idle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from broker.jsontypes import Json, JsonObject

DEFAULT_HALF_LIFE_S = 6 * 3600.0
Key = tuple[str, str]  # (cluster, pool or GPU class)


@dataclass
class _Decayed:
    at_s: float = 0.0  # the instant the sums below are decayed to
    weight: float = 0.0  # decayed number of observed starts
    wait_sum: float = 0.0  # decayed sum of their waits
    gpus: float = 0.0  # decayed sum of their GPUs

    def decay_to(self, now_s: float, tau_s: float) -> None:
        if now_s > self.at_s:
            factor = math.exp(-(now_s - self.at_s) / tau_s)
            self.weight, self.wait_sum, self.gpus = (self.weight * factor, self.wait_sum * factor, self.gpus * factor)
            self.at_s = now_s


@dataclass
class WaitEstimator:
    half_life_s: float = DEFAULT_HALF_LIFE_S
    _cells: dict[Key, _Decayed] = field(default_factory=dict)
    _first_s: dict[Key, float] = field(default_factory=dict)

    @property
    def tau_s(self) -> float:
        return self.half_life_s / math.log(2)

    def observe(self, key: Key, started_s: float, wait_s: float, gpus: int) -> None:
        """A job of ``gpus`` GPUs started at ``started_s`` after waiting ``wait_s`` there.
        Observations may come in any order."""
        cell = self._cells.setdefault(key, _Decayed(at_s=started_s))
        self._first_s[key] = min(self._first_s.get(key, started_s), started_s)
        factor = 1.0
        if started_s < cell.at_s:
            factor = math.exp(-(cell.at_s - started_s) / self.tau_s)
        else:
            cell.decay_to(started_s, self.tau_s)
        cell.weight += factor
        cell.wait_sum += factor * max(0.0, wait_s)
        cell.gpus += factor * gpus

    def observed(self, key: Key) -> bool:
        return key in self._cells

    def mean_wait_s(self, key: Key, now_s: float) -> float:
        cell = self._cells.get(key)
        if cell is None or cell.weight <= 0:
            return 0.0
        return cell.wait_sum / cell.weight  # decay scales both sums alike

    def start_rate(self, key: Key, now_s: float) -> float:
        """GPUs started per second, recently."""
        cell = self._cells.get(key)
        if cell is None:
            return 0.0
        gpus = cell.gpus * math.exp(-max(0.0, now_s - cell.at_s) / self.tau_s)
        # over a history shorter than the time constant, divide by what was seen
        span = min(self.tau_s, max(now_s - self._first_s[key], 60.0))
        return gpus / span

    def predict_s(self, key: Key, now_s: float, pending_gpus: int, gpus: int, prior_s: float, cap_s: float) -> float:
        """The expected wait of a ``gpus``-GPU job behind ``pending_gpus`` queued GPUs."""
        if not self.observed(key):
            return min(prior_s, cap_s)
        floor = self.mean_wait_s(key, now_s)
        if pending_gpus <= 0:
            return min(floor, cap_s)
        rate = self.start_rate(key, now_s)
        if rate <= 0:
            return cap_s
        return min(max(floor, (pending_gpus + gpus) / rate), cap_s)


@dataclass(frozen=True)
class ErrorSummary:
    """How far predictions were from what happened: |predicted - actual|, seconds."""

    count: int
    mean_abs_s: float
    p50_abs_s: float
    p90_abs_s: float
    mean_signed_s: float  # > 0: the estimator expected longer waits than seen

    def seconds(self) -> dict[str, float]:
        """The figures in seconds, by field name (everything but the count)."""
        return {name: getattr(self, name) for name in _SUMMARY_FIELDS}

    def to_dict(self) -> JsonObject:
        """Whole seconds: finer is noise (a replay's predictions differ in the 7th digit)."""
        return {"count": self.count, **{name: round(value) for name, value in self.seconds().items()}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Json]) -> ErrorSummary:
        """The inverse of ``to_dict``; a missing or malformed value raises KeyError/TypeError/ValueError."""
        return cls(count=int(_number(data, "count")), **{name: _number(data, name) for name in _SUMMARY_FIELDS})


def _number(data: Mapping[str, Json], name: str) -> float:
    value = data[name]
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(f"{name}: {value!r} is not a number")
    return float(value)


_SUMMARY_FIELDS = ("mean_abs_s", "p50_abs_s", "p90_abs_s", "mean_signed_s")


def _nearest_rank(ordered: Sequence[float], q: float) -> float:
    return ordered[max(1, math.ceil(q / 100.0 * len(ordered))) - 1]


def error_summary(pairs: Iterable[tuple[float, float]]) -> ErrorSummary | None:
    """From (predicted, actual) pairs; None when there are none."""
    pairs = list(pairs)
    if not pairs:
        return None
    errors = sorted(abs(p - a) for p, a in pairs)
    return ErrorSummary(
        count=len(pairs),
        mean_abs_s=sum(errors) / len(errors),
        p50_abs_s=_nearest_rank(errors, 50),
        p90_abs_s=_nearest_rank(errors, 90),
        mean_signed_s=sum(p - a for p, a in pairs) / len(pairs),
    )


@dataclass(frozen=True)
class DestinationError:
    """The error of the predictions made for one destination (cluster x pool)."""

    cluster: str
    pool: str
    summary: ErrorSummary


@dataclass(frozen=True)
class EstimatorReport:
    """The estimator's error over a set of started workloads: all of them, and per
    destination (where a prediction went wrong is what an operator can act on)."""

    overall: ErrorSummary
    by_destination: tuple[DestinationError, ...] = ()

    def to_dict(self) -> JsonObject:
        return {
            "overall": self.overall.to_dict(),
            "by_destination": [
                {"cluster": d.cluster, "pool": d.pool, **d.summary.to_dict()} for d in self.by_destination
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Json]) -> EstimatorReport:
        """The inverse of ``to_dict``; a missing or malformed value raises KeyError/TypeError/ValueError."""
        overall, by_destination = data["overall"], data.get("by_destination", [])
        if not isinstance(overall, Mapping) or not isinstance(by_destination, Sequence):
            raise TypeError("overall must be an object and by_destination a list")
        return cls(overall=ErrorSummary.from_dict(overall), by_destination=destination_errors(by_destination))


def destination_errors(stored: Iterable[Json]) -> tuple[DestinationError, ...]:
    """``EstimatorReport.to_dict``'s ``by_destination`` list back as typed errors."""
    errors = []
    for d in stored:
        if not isinstance(d, Mapping):
            raise TypeError(f"a destination must be an object, not {d!r}")
        errors.append(
            DestinationError(cluster=str(d["cluster"]), pool=str(d["pool"]), summary=ErrorSummary.from_dict(d))
        )
    return tuple(errors)


def estimator_report(rows: Iterable[tuple[str, str, float, float]]) -> EstimatorReport | None:
    """From (cluster, pool, predicted, actual) rows; None when there are none."""
    rows = list(rows)
    overall = error_summary((p, a) for _, _, p, a in rows)
    if overall is None:
        return None
    groups: dict[Key, list[tuple[float, float]]] = {}
    for cluster, pool, predicted, actual in rows:
        groups.setdefault((cluster, pool), []).append((predicted, actual))
    by_destination = tuple(
        DestinationError(cluster=cluster, pool=pool, summary=summary)
        for (cluster, pool), pairs in sorted(groups.items())
        if (summary := error_summary(pairs)) is not None
    )
    return EstimatorReport(overall=overall, by_destination=by_destination)
