"""The Pareto picture of a sweep: p95 wait against cloud spend, one panel per trace and
load, the MultiKueue race's target box shaded.

matplotlib is an optional (dev) dependency: only this module needs it, and only when a
picture is asked for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from broker.replay.spread import Interval
from broker.replay.spread_report import PolicySpread
from broker.replay.sweep import RACE, SPEND_TARGET, WAIT_TARGET, Summary


def frontier(points: Sequence[tuple[float, float, str]]) -> list[tuple[float, float, str]]:
    """The points no other point beats on both axes (lower is better on each)."""
    return sorted(p for p in points if not any(q[0] <= p[0] and q[1] <= p[1] and q[:2] != p[:2] for q in points))


def draw(summaries: Sequence[Summary], path: Path, title: str = "") -> Path:
    """One panel per trace x compression: p95 wait (min) against cloud spend, each policy a
    point (mean over the seeds), the frontier dotted, the target box (p95 <= 0.7x and spend
    <= 1.0x the race's) shaded."""
    import matplotlib  # noqa: PLC0415 - optional dependency

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    traces = sorted({s.trace for s in summaries})
    loads = sorted({s.compress for s in summaries})
    policies = sorted({s.policy for s in summaries})
    colours = {p: plt.get_cmap("tab10")(i % 10) for i, p in enumerate(policies)}
    fig, axes = plt.subplots(len(traces), len(loads), figsize=(4.6 * len(loads), 4.0 * len(traces)), squeeze=False)
    for row, trace in enumerate(traces):
        for col, compress in enumerate(loads):
            ax = axes[row][col]
            mine = [s for s in summaries if s.trace == trace and s.compress == compress]
            if not mine:
                ax.axis("off")
                ax.text(
                    0.5,
                    0.5,
                    f"{trace.replace('-dev.csv', '')} x{compress:g}: not run",
                    ha="center",
                    va="center",
                    fontsize=9,
                    transform=ax.transAxes,
                )
                continue
            _panel(ax, mine, colours)
            load = f", load {mine[0].load_share:.0%}, {mine[0].seeds} seed(s)" if mine else ""
            ax.set_title(f"{trace.replace('-dev.csv', '')} x{compress:g}{load}", fontsize=9)
            ax.set_xlabel("cloud spend (price units)", fontsize=8)
            ax.set_ylabel("p95 queue wait (min)", fontsize=8)
            ax.tick_params(labelsize=7)
    handles = [plt.Line2D([], [], marker="o", linestyle="", color=colours[p], label=p) for p in policies]
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 6), fontsize=8)
    fig.suptitle(
        title
        or "Held-out second halves: p95 wait against cloud spend (green: the "
        "target, p95 <= 0.7x and spend <= 1.0x the race; dotted: the frontier)",
        fontsize=9,
    )
    return _save(fig, plt, path)


def _panel(ax, mine: Sequence[Summary], colours: dict) -> None:
    race = next((s for s in mine if s.policy == RACE), None)
    if race is not None:
        ax.fill_between([0, race.spend * SPEND_TARGET], 0, race.p95_wait_min * WAIT_TARGET, color="green", alpha=0.12)
    for s in mine:
        ax.scatter(s.spend, s.p95_wait_min, color=colours[s.policy], s=45, edgecolors="black", linewidths=0.5, zorder=3)
    pts = frontier([(s.spend, s.p95_wait_min, s.policy) for s in mine])
    ax.plot([p[0] for p in pts], [p[1] for p in pts], linestyle=":", color="grey", linewidth=1)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)


def draw_spread(rows: Sequence[PolicySpread], path: Path) -> Path:
    """One panel per trace x half x load: every policy at its mean p95 wait (min) and cloud
    spend over the seeds, with its 95% interval on each axis as bars (none for one seed);
    the race's target box shaded at its means."""
    import matplotlib  # noqa: PLC0415 - optional dependency

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    rows = [r for r in rows if r.figures["p95_wait_s"] is not None]  # the lower bound has no p95
    panels = sorted({(r.trace, r.half, r.compress, r.target_load or 0.0) for r in rows})
    policies = sorted({r.policy for r in rows})
    colours = {p: plt.get_cmap("tab10")(i % 10) for i, p in enumerate(policies)}
    columns = min(3, len(panels)) or 1
    lines = -(-len(panels) // columns) or 1
    fig, axes = plt.subplots(lines, columns, figsize=(4.6 * columns, 4.0 * lines), squeeze=False)
    for ax in axes.flat[len(panels) :]:
        ax.axis("off")
    for ax, (trace, half, compress, target) in zip(axes.flat, panels, strict=False):
        key = (trace, half, compress, target)
        mine = [r for r in rows if (r.trace, r.half, r.compress, r.target_load or 0.0) == key]
        _spread_panel(ax, mine, colours)
        aim = f"target {target:g}, " if target else ""
        title = f"{trace.replace('-dev.csv', '')} {half} x{compress:g}, {aim}load {mine[0].load_share:.0%}"
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("cloud spend (price units)", fontsize=8)
        ax.set_ylabel("p95 queue wait (min)", fontsize=8)
        ax.tick_params(labelsize=7)
    handles = [plt.Line2D([], [], marker="o", linestyle="", color=colours[p], label=p) for p in policies]
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 6), fontsize=8)
    fig.suptitle(
        "p95 wait against cloud spend: means over the seeds with Student-t 95% intervals "
        "(green: p95 <= 0.7x and spend <= 1.0x the race's means)",
        fontsize=9,
    )
    return _save(fig, plt, path)


def _spread_panel(ax, mine: Sequence[PolicySpread], colours: dict) -> None:
    def point(r: PolicySpread) -> tuple[Interval, Interval] | None:
        wait, spend = r.figures["p95_wait_s"], r.figures["cloud_spend"]
        return None if wait is None or spend is None else (wait.scaled(1 / 60), spend)

    race = next((point(r) for r in mine if r.policy == RACE), None)
    if race is not None:
        ax.fill_between([0, race[1].mean * SPEND_TARGET], 0, race[0].mean * WAIT_TARGET, color="green", alpha=0.12)
    for r in mine:
        xy = point(r)
        if xy is None:
            continue
        wait, spend = xy
        ax.errorbar(
            spend.mean,
            wait.mean,
            xerr=[[spend.mean - spend.low], [spend.high - spend.mean]] if spend.has_spread else None,
            yerr=[[wait.mean - wait.low], [wait.high - wait.mean]] if wait.has_spread else None,
            fmt="o",
            color=colours[r.policy],
            markeredgecolor="black",
            markeredgewidth=0.5,
            capsize=3,
            zorder=3,
        )
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)


def _save(fig, plt, path: Path) -> Path:
    """Lay the picture out (room for the legend below) and write it."""
    fig.tight_layout(rect=(0, 0.05, 1, 0.96))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
