"""The sweep's table with its spread, made from the cell files (broker/replay/cells.py):
per trace, half, load and policy, the mean and 95% interval of each figure over the
seeds, and the policy against the race seed by seed (broker/replay/spread.py).

The table lives between two marker lines in README.md and docs/replay.md, so one command
regenerates it in both without touching the prose around it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from broker.replay.groups import Group, GroupKey, Seeds, figure, grouped, seed_pairs
from broker.replay.spread import METHOD, MIN_SEEDS, RATIO_FLOOR_WAIT_S, Interval, VsRace, t_interval, vs_race
from broker.replay.sweep import RACE
from broker.replay.targets import markdown as targets_markdown

START, END = "<!-- replay-table:start -->", "<!-- replay-table:end -->"


@dataclass(frozen=True)
class Measure:
    key: str  # in a cell's metrics
    label: str
    minutes: bool  # stored in seconds, shown in minutes
    floor: float  # a seed gives a ratio to the race only where the race's value is at least this


MEASURES = (
    Measure("p50_wait_s", "p50 wait", True, RATIO_FLOOR_WAIT_S),
    Measure("p95_wait_s", "p95 wait", True, RATIO_FLOOR_WAIT_S),
    Measure("mean_wait_s", "mean wait", True, RATIO_FLOOR_WAIT_S),
    Measure("p95_gang_wait_s", "gang p95 wait", True, RATIO_FLOOR_WAIT_S),
    Measure("cloud_spend", "cloud spend", False, 0.0),
    Measure("worst_tenant_slowdown", "worst tenant's slowdown", False, 0.0),
    Measure("local_p95_wait_s", "local jobs' p95 wait", True, RATIO_FLOOR_WAIT_S),
)


@dataclass(frozen=True)
class PolicySpread:
    """One policy in one trace x half x load, over its seeds."""

    trace: str
    half: str
    compress: float
    target_load: float | None
    policy: str
    seeds: tuple[int, ...]
    load_share: float
    figures: dict[str, Interval | None]  # None: no seed has the figure (older results)
    against_race: dict[str, VsRace | None]  # None: the race itself, or no seed paired with it


def summarise(records: Sequence[dict[str, Any]]) -> list[PolicySpread]:
    rows = []
    for (trace, half, compress, load), group in sorted(grouped(records).items()):
        for policy in sorted(group, key=lambda p: (p != RACE, p)):
            rows.append(_spread((trace, half, compress, load), policy, group))
    return rows


def _spread(key: GroupKey, policy: str, group: Group) -> PolicySpread:
    trace, half, compress, load = key
    mine, race = group[policy], group.get(RACE, {})
    return PolicySpread(
        trace=trace,
        half=half,
        compress=compress,
        target_load=load or None,
        policy=policy,
        seeds=tuple(sorted(mine)),
        load_share=sum(r["offered_load_share"] for r in mine.values()) / len(mine),
        figures={m.key: figure(mine, m.key) for m in MEASURES},
        against_race={m.key: None if policy == RACE else _against(mine, race, m) for m in MEASURES},
    )


def _against(mine: Seeds, race: Seeds, m: Measure) -> VsRace | None:
    pairs = seed_pairs(mine, race, m.key)
    return vs_race(pairs, m.floor) if pairs else None


# -- rendering ----------------------------------------------------------------------------


def _number(x: float, m: Measure, sign: bool = False) -> str:
    x = x / 60 if m.minutes else x
    fmt = ",.1f" if m.minutes else ",.0f" if m.key == "cloud_spend" else ",.2f"
    return format(x, ("+" if sign else "") + fmt)


def _interval(i: Interval | None, m: Measure, sign: bool = False, count: bool = True) -> str:
    if i is None:
        return "n/a"
    if not i.has_spread:
        return _number(i.mean, m, sign) + (" (1 seed)" if count else "")
    return f"{_number(i.mean, m, sign)} [{_number(i.low, m, sign)}, {_number(i.high, m, sign)}]"


def _ratio(i: Interval, count: bool = True) -> str:
    if not i.has_spread:
        return f"{i.mean:.2f}x" + (" (1 seed)" if count else "")
    return f"{i.mean:.2f}x [{i.low:.2f}, {i.high:.2f}]"


def _seeds(n: int) -> str:
    return f"{n} seed{'s' if n != 1 else ''}"


def _versus(v: VsRace | None, m: Measure) -> str:
    """The ratio, the gap (seeds where the race's figure is under the floor), or both, each
    with its number of seeds when both are there."""
    if v is None:
        return "-"
    both = v.ratio is not None and v.gap is not None
    parts = []
    if v.ratio is not None:
        parts.append(_ratio(v.ratio, count=not both) + (f" ({_seeds(v.ratio.n)})" if both else ""))
    if v.gap is not None:
        gap = _interval(v.gap, m, sign=True, count=not both) + (" min" if m.minutes else "")
        parts.append(f"gap {gap}" + (f" ({_seeds(v.gap.n)})" if both else ""))
    return "; ".join(parts)


def seeds_words(n: int) -> str:
    return str(n) if n >= MIN_SEEDS else f"{_seeds(n)}: fewer than the {MIN_SEEDS} required"


def _key_cells(row: PolicySpread) -> list[str]:
    target = f", target {row.target_load:g}" if row.target_load is not None else ""
    load = f"x{row.compress:g}{target}, {row.load_share:.0%}"
    return [row.trace, row.half, load, row.policy, seeds_words(len(row.seeds))]


def _table(rows: Sequence[PolicySpread], heads: list[str], cells: Any) -> list[str]:
    head = ["trace", "half", "compress, load", "policy", "seeds", *heads]
    lines = ["| " + " | ".join(head) + " |", "|---|---|---|---|---:|" + "---:|" * len(heads)]
    return lines + ["| " + " | ".join([*_key_cells(r), *cells(r)]) + " |" for r in rows]


def provenance(records: Sequence[dict[str, Any]]) -> list[str]:
    """Which code made the results, and what they cost."""
    by_code: dict[str, int] = {}
    for r in records:
        if r["commit"] is None:
            code = "no commit recorded (older results)"
        else:
            code = f"commit {r['commit'][:12]} ({'clean tree' if r['clean'] else 'tree with uncommitted changes'})"
        by_code[code] = by_code.get(code, 0) + 1
    cpu = [r["cpu_s"] for r in records if r["cpu_s"] is not None]
    without = len(records) - len(cpu)
    return [
        f"Results: {len(records)} runs; " + "; ".join(f"{code}: {n}" for code, n in sorted(by_code.items())) + ".",
        f"CPU total: {sum(cpu) / 3600:,.2f} h over {len(cpu)} runs (each run's process time)"
        + (f"; {without} runs carry no CPU figure (older results)." if without else "."),
    ]


def gang_shapes(records: Sequence[dict[str, Any]]) -> list[str]:
    """Each policy's gang p95 wait per gang shape (workers x GPUs each), a table per trace,
    half and load: the mean over the seeds with its 95% interval, and how many gangs of the
    shape started over all seeds (a seed without one adds nothing to that shape)."""
    lines = []
    for (trace, half, compress, load), group in sorted(grouped(records).items()):
        shaped = {p: [r["metrics"].get("by_gang_shape") or {} for r in seeds.values()] for p, seeds in group.items()}
        shapes = sorted({s for runs in shaped.values() for b in runs for s in b}, key=_shape_order)
        if not shapes:
            continue
        target = f", target {load:g}" if load else ""
        lines += ["", f"{trace} {half}, x{compress:g}{target}:", "", "| policy | " + " | ".join(shapes) + " |",
                  "|---|" + "---:|" * len(shapes)]  # fmt: skip
        for policy in sorted(shaped, key=lambda p: (p != RACE, p)):
            if any(shaped[policy]):
                lines.append(f"| {policy} | " + " | ".join(_shape_cell(shaped[policy], s) for s in shapes) + " |")
    if not lines:
        return []
    return ["", "Gangs' p95 wait (min) per shape, workers x GPUs each: the mean over the seeds [95% interval] "
            "(the gangs of that shape started, all seeds)."] + lines  # fmt: skip


def _shape_order(shape: str) -> tuple[int, int]:
    workers, gpus = shape.split("x")
    return int(workers) * int(gpus), int(workers)


def _shape_cell(runs: list[dict[str, list[float]]], shape: str) -> str:
    p95s = [b[shape][2] / 60 for b in runs if shape in b]
    if not p95s:
        return "n/a"
    i = t_interval(p95s)
    spread = f" [{i.low:,.1f}, {i.high:,.1f}]" if i.has_spread else ""
    return f"{i.mean:,.1f}{spread} ({sum(int(b[shape][0]) for b in runs if shape in b)})"


def fleets_used(records: Sequence[dict[str, Any]]) -> list[str]:
    """The fleet each scaled cell ran on (the same for every seed and policy of a trace at
    one target load; each seed's is listed where they differ)."""
    used: dict[tuple[str, str, float], set[str]] = {}
    for r in records:
        if r.get("scaled_fleet"):
            used.setdefault((r["trace"], r["half"], float(r["target_load"])), set()).add(r["scaled_fleet"])
    if not used:
        return []
    lines = ["", "Fleets used (on-prem nodes scaled to the target load):", ""]
    for (trace, half, target), fleets in sorted(used.items()):
        lines += [f"- {trace} {half} half, target {target:g}: {f}" for f in sorted(fleets)]
    return lines


def markdown(records: Sequence[dict[str, Any]], picture: str = "") -> str:
    rows = summarise(records)
    lines = [
        f"Method: {METHOD}. A wait's ratio is taken in a seed only where the race's same figure is at least "
        f"{RATIO_FLOOR_WAIT_S / 60:g} min, otherwise the gap (policy minus race, minutes); spend and slowdown: "
        f"a ratio where the race's figure is above 0. Worst tenant's slowdown: per tenant, the mean of "
        f"(wait + run) / max(run, 10 s) over its jobs; the worst tenant's value. At least {MIN_SEEDS} seeds per "
        "cell are required.",
        *provenance(records),
        "",
        *_table(rows, [f"{m.label}{' (min)' if m.minutes else ''}" for m in MEASURES],
                lambda r: [_interval(r.figures[m.key], m) for m in MEASURES]),
        "",
        "Against the race of the same seed: the mean [95% interval] of the per-seed ratios; \"gap\": of the "
        "per-seed differences (policy minus race), where the race's figure was under the floor above.",
        "",
        *_table(rows, [f"{m.label} vs race" for m in MEASURES],
                lambda r: [_versus(r.against_race[m.key], m) for m in MEASURES]),
    ]  # fmt: skip
    lines += gang_shapes(records)
    targets = targets_markdown(grouped(records))
    lines += ["", *targets] if targets else []
    lines += fleets_used(records)
    if picture:
        lines += ["", f"![p95 wait against cloud spend, every policy, with 95% intervals]({picture})"]
    return "\n".join(lines) + "\n"


def between_markers(path: Path, block: str) -> str:
    """The text of ``path`` with what lies between its marker lines replaced by ``block``;
    the rest kept byte for byte. A marker is a line of its own (one quoted in prose is not)."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.strip() == START]
    ends = [i for i, line in enumerate(lines) if line.strip() == END]
    if len(starts) != 1 or len(ends) != 1 or starts[0] > ends[0]:
        raise ValueError(f"{path}: needs one {START} line and, after it, one {END} line")
    return "".join([*lines[: starts[0] + 1], block.rstrip() + "\n", *lines[ends[0] :]])


def rewrite_between_markers(path: Path, block: str) -> bool:
    """Write ``between_markers``; whether the file changed."""
    new = between_markers(path, block)
    changed = new != path.read_text(encoding="utf-8")
    if changed:
        path.write_text(new, encoding="utf-8")
    return changed


def picture_link(picture: Path, markdown_file: Path) -> str:
    """The picture's path as a link from ``markdown_file``."""
    return Path(os.path.relpath(picture.resolve(), markdown_file.resolve().parent)).as_posix()
