"""A sweep's cell records grouped for the reports: per cell (trace, half, compression,
target load), each policy's records by seed, and the figures read from them.

Both reports read the records this way (``spread_report``'s tables and ``targets``'
verdicts); it lives here so neither imports the other for it.
"""

from __future__ import annotations

from typing import Any, Sequence

from broker.replay.spread import Interval, t_interval

Seeds = dict[int, dict[str, Any]]  # seed -> cell record
Group = dict[str, Seeds]  # policy -> its records by seed
GroupKey = tuple[str, str, float, float]  # trace, half, compression, target load (0: none)


def grouped(records: Sequence[dict[str, Any]]) -> dict[GroupKey, Group]:
    """The records by cell and policy; a cell given twice for one seed is an error."""
    groups: dict[GroupKey, Group] = {}
    for r in records:
        key = (r["trace"], r["half"], float(r["compress"]), float(r.get("target_load") or 0.0))
        seeds = groups.setdefault(key, {}).setdefault(r["policy"], {})
        if r["seed"] in seeds:
            cell = f"{r['trace']} {r['half']} x{r['compress']:g} load {key[3]:g} seed {r['seed']} {r['policy']}"
            raise ValueError(f"two results for {cell}: give each cell once")
        seeds[r["seed"]] = r
    return groups


def value(record: dict[str, Any], key: str) -> float | None:
    """One seed's figure (None where an older record lacks it)."""
    found = record["metrics"].get(key)
    return None if found is None else float(found)


def figure(seeds: Seeds, key: str) -> Interval | None:
    """A figure over the seeds that have it, with its interval."""
    values = [v for v in (value(r, key) for r in seeds.values()) if v is not None]
    return t_interval(values) if values else None


def seed_pairs(mine: Seeds, race: Seeds, key: str) -> list[tuple[float, float]]:
    """(policy, race) per seed both ran and both have the figure: paired seed for seed, so a
    half-done sweep stays fair."""
    pairs = []
    for seed in sorted(set(mine) & set(race)):
        a, b = value(mine[seed], key), value(race[seed], key)
        if a is not None and b is not None:
            pairs.append((a, b))
    return pairs
