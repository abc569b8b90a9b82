"""A figure over seeds with its spread: the mean and a Student-t 95% interval of the
per-seed values, and a policy against the race taken seed by seed, then summarised.

Why per seed: each seed draws another synthetic mix (tenants, gangs, local jobs) and
another tie-break, so the seeds are independent replays of the same cell and the
per-seed values are the sample. A ratio of means (what the sweep printed before) hides
how far one seed's result is from another's; the mean of per-seed ratios, with its
interval, shows it.

A ratio to a short wait says little (0.5 min against 1 min is 0.5x), so for a wait a
seed's ratio is taken only where the race waited at least 10 minutes by the same figure
(for the p95, the rule as stated; the p50, mean and gang p95 follow it); below that the
seed gives the absolute gap in minutes. Spend: a ratio wherever the race spent anything.
No scipy: the t quantiles are a table (df 1..30) and the Cornish-Fisher expansion beyond.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

METHOD = (
    "mean over seeds and Student-t 95% interval of the per-seed values "
    "(mean ± t(0.975, n-1) · s/√n); ratios to the race taken seed by seed, then summarised the same way"
)
MIN_SEEDS = 5  # what a cell needs before its interval is worth quoting
RATIO_FLOOR_WAIT_S = 600.0  # a wait's ratio only where the race's is at least 10 minutes

# t(0.975, df) for df = 1..30 (standard tables, 4 decimals)
T_975 = (
    12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
    2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
    2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423,
)  # fmt: skip
Z_975 = 1.959963984540054


def t_975(df: int) -> float:
    """The 97.5% quantile of Student's t with ``df`` degrees of freedom (a two-sided 95%
    interval); beyond the table the Cornish-Fisher expansion, within 1e-4 there."""
    if df < 1:
        raise ValueError(f"degrees of freedom: at least 1, got {df}")
    if df <= len(T_975):
        return T_975[df - 1]
    z = Z_975
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


@dataclass(frozen=True)
class Interval:
    """A mean over ``n`` seeds and its 95% interval (NaN bounds for one seed: no spread)."""

    mean: float
    low: float
    high: float
    n: int

    @property
    def has_spread(self) -> bool:
        return self.n >= 2

    def scaled(self, factor: float) -> Interval:
        return Interval(self.mean * factor, self.low * factor, self.high * factor, self.n)


def t_interval(values: Sequence[float]) -> Interval:
    """The mean of ``values`` with its Student-t 95% interval."""
    n = len(values)
    if n == 0:
        raise ValueError("an interval needs at least one value")
    centre = sum(values) / n
    if n == 1:
        return Interval(centre, math.nan, math.nan, 1)
    sd = math.sqrt(sum((v - centre) ** 2 for v in values) / (n - 1))
    half = t_975(n - 1) * sd / math.sqrt(n)
    return Interval(centre, centre - half, centre + half, n)


@dataclass(frozen=True)
class VsRace:
    """A policy against the race over paired seeds: the ratio over the seeds where the
    race's value passes the floor, the absolute gap (policy - race) over the others."""

    ratio: Interval | None
    gap: Interval | None


def split_by_floor(pairs: Sequence[tuple[float, float]], floor: float) -> tuple[list[float], list[float]]:
    """``pairs``: (policy, race) per seed. The ratios of the seeds where the race's value is at
    least ``floor`` and above 0, and the gaps (policy - race) of the others."""
    ratios = [mine / race for mine, race in pairs if race >= floor and race > 0]
    gaps = [mine - race for mine, race in pairs if not (race >= floor and race > 0)]
    return ratios, gaps


def vs_race(pairs: Sequence[tuple[float, float]], floor: float) -> VsRace:
    """The ratios and gaps of ``split_by_floor``, each summarised with its interval."""
    ratios, gaps = split_by_floor(pairs, floor)
    return VsRace(t_interval(ratios) if ratios else None, t_interval(gaps) if gaps else None)
