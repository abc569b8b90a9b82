"""Issue 24's targets, judged from a sweep's cell files: met or not, with the figures.

Per trace, half, compression and target load (a "cell"), for the ``default`` preset against
the race of the same seed:

* at the loads it must win (0.7, 0.9): p95 wait <= 0.7x the race's AND cloud spend <=
  1.0x, judged on the upper ends of the 95% intervals of the per-seed ratios;
* at the overload (1.1): no other practical policy (the lower bound and the clairvoyant
  FIFO excluded) has both a lower p95 and a lower spend than ``default`` with disjoint
  intervals (of the per-seed values);
* at every load: gang p95 and mean wait <= 1.0x the race's (mean of the per-seed ratios) with
  no seed above 1.1x.

A seed whose race figure is under the wait floor (10 min) gives no ratio (spread.py); for
it the target holds only where ``default``'s figure is at most the race's (the gap <= 0),
so a seed is never left out in ``default``'s favour.  Where the sweep lacks a cell's race or
``default``, the target is "not run", never met.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.replay.clairvoyant import ClairvoyantFifo
from broker.replay.runner import LOWER_BOUND
from broker.replay.groups import Group, GroupKey, Seeds, figure, seed_pairs
from broker.replay.spread import RATIO_FLOOR_WAIT_S, Interval, split_by_floor, t_interval
from broker.replay.sweep import RACE

POLICY = "default"
WIN_LOADS = (0.7, 0.9)  # default must dominate the race here
OVERLOAD = 1.1  # here no practical policy may dominate default
P95_MARK, SPEND_MARK = 0.7, 1.0
MEAN_MARK, SEED_MARK = 1.0, 1.1
NOT_PRACTICAL = frozenset({LOWER_BOUND, ClairvoyantFifo.name})


@dataclass(frozen=True)
class Paired:
    """``default`` against the race on one figure, seed by seed."""

    ratios: tuple[float, ...]  # seeds where the race's figure passes the floor
    gaps: tuple[float, ...]  # the others: default minus race

    @property
    def interval(self) -> Interval | None:
        return t_interval(self.ratios) if self.ratios else None

    def upper_at_most(self, mark: float) -> bool:
        i = self.interval
        if i is None and not self.gaps:
            return False
        upper_ok = i is None or (i.high if i.has_spread else i.mean) <= mark
        return upper_ok and all(g <= 0 for g in self.gaps)

    def mean_and_seeds_at_most(self, mean_mark: float, seed_mark: float) -> bool:
        if not self.ratios and not self.gaps:
            return False
        mean = sum(self.ratios) / len(self.ratios) if self.ratios else 0.0
        ratios_ok = not self.ratios or (mean <= mean_mark and max(self.ratios) <= seed_mark)
        return ratios_ok and all(g <= 0 for g in self.gaps)

    def words(self, minutes: bool) -> str:
        parts = []
        i = self.interval
        if i is not None:
            spread = f" [{i.low:.2f}, {i.high:.2f}]" if i.has_spread else " (1 seed)"
            parts.append(f"{i.mean:.2f}x{spread}, worst seed {max(self.ratios):.2f}x")
        if self.gaps:
            gaps = ", ".join(_gap(g, minutes) for g in self.gaps)
            parts.append(f"gap in {len(self.gaps)} seed(s): {gaps}")
        return "; ".join(parts) or "not run"


def _gap(gap: float, minutes: bool) -> str:
    """A wait's gap in minutes, or in seconds under a minute (a gap of seconds still fails
    the target, and "+0.0 min" would hide why)."""
    if not minutes:
        return f"{gap:+,.0f}"
    return f"{gap:+,.1f} s" if abs(gap) < 60 else f"{gap / 60:+,.1f} min"


def paired(mine: Seeds, race: Seeds, key: str, floor: float) -> Paired:
    ratios, gaps = split_by_floor(seed_pairs(mine, race, key), floor)
    return Paired(tuple(ratios), tuple(gaps))


def dominators(group: Group) -> list[str]:
    """Practical policies with both a lower p95 wait and a lower spend than ``default``, each
    interval wholly below ``default``'s (one seed: no interval, never disjoint)."""
    mine = group.get(POLICY)
    if not mine:
        return []
    p95, spend = figure(mine, "p95_wait_s"), figure(mine, "cloud_spend")
    found = []
    for policy, seeds in sorted(group.items()):
        if policy == POLICY or policy in NOT_PRACTICAL:
            continue
        o_p95, o_spend = figure(seeds, "p95_wait_s"), figure(seeds, "cloud_spend")
        if None in (p95, spend, o_p95, o_spend):
            continue
        if _below(o_p95, p95) and _below(o_spend, spend):
            found.append(policy)
    return found


def _below(a: Interval | None, b: Interval | None) -> bool:
    return bool(a and b and a.has_spread and b.has_spread and a.high < b.low)


def _yes(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def _row(key: GroupKey, group: Group) -> list[str] | None:
    trace, half, compress, load = key
    mine, race = group.get(POLICY), group.get(RACE)
    if not mine or not race:
        return None
    p95 = paired(mine, race, "p95_wait_s", RATIO_FLOOR_WAIT_S)
    spend = paired(mine, race, "cloud_spend", 0.0)
    gang = paired(mine, race, "p95_gang_wait_s", RATIO_FLOOR_WAIT_S)
    mean = paired(mine, race, "mean_wait_s", RATIO_FLOOR_WAIT_S)
    if load in WIN_LOADS:
        headline = _yes(p95.upper_at_most(P95_MARK) and spend.upper_at_most(SPEND_MARK)) + " (dominates the race)"
    elif load == OVERLOAD:
        better = dominators(group)
        headline = _yes(not better) + (f" (dominated by {', '.join(better)})" if better else " (no policy dominates)")
    else:
        headline = "no target at this load"
    gangs_ok = gang.mean_and_seeds_at_most(MEAN_MARK, SEED_MARK) and mean.mean_and_seeds_at_most(MEAN_MARK, SEED_MARK)
    bound = figure(group.get(LOWER_BOUND, {}), "mean_wait_s")
    own = figure(mine, "mean_wait_s")
    against_bound = "n/a" if bound is None or own is None else f"{own.mean / 60:,.1f} / {bound.mean / 60:,.1f}"
    return [
        f"{trace} {half}", f"x{compress:g}, {load:g}", str(len(set(mine) & set(race))), headline,
        p95.words(True), spend.words(False), _yes(gangs_ok), gang.words(True), mean.words(True), against_bound,
    ]  # fmt: skip


def markdown(groups: dict[GroupKey, Group]) -> list[str]:
    """The targets table, from the cells grouped as ``spread_report.grouped`` does (empty
    when no cell has both ``default`` and the race)."""
    rows = [row for key, group in sorted(groups.items()) if (row := _row(key, group))]
    if not rows:
        return []
    head = [
        "trace", "compress, target load", "paired seeds", "p95 and spend target", "p95 vs race",
        "spend vs race", "gang p95 and mean <= 1.0x, no seed > 1.1x", "gang p95 vs race", "mean wait vs race",
        "mean wait vs lower bound (min)",
    ]  # fmt: skip
    return [
        'Issue 24\'s targets for `default` (docs/replay.md, "Results with their spread"): at loads 0.7 and 0.9 '
        f"the upper ends of the 95% intervals of the per-seed ratios p95/race <= {P95_MARK} and spend/race <= "
        f"{SPEND_MARK}; at {OVERLOAD} no practical policy (not the lower bound or the clairvoyant FIFO) with "
        "a lower p95 and a lower spend, both intervals disjoint; at every load gang p95 and mean wait at most "
        f"{MEAN_MARK}x the race's (mean of per-seed ratios), no seed above {SEED_MARK}x. A seed where the race's "
        f"wait is under {RATIO_FLOOR_WAIT_S / 60:g} min counts only if default's is at most the race's.",
        "",
        "| " + " | ".join(head) + " |",
        "|---|---|---:|" + "---|" * (len(head) - 3),
        *("| " + " | ".join(r) + " |" for r in rows),
    ]
