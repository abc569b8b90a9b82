"""The Pareto picture of a sweep: p95 wait against cloud spend, both relative to the
MultiKueue race at the same load, one panel per trace, one marker per compression.

matplotlib is an optional (dev) dependency: only this module needs it, and only when a
picture is asked for.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from broker.replay.sweep import RACE, SPEND_TARGET, WAIT_TARGET, Summary

MARKERS = {3.0: "o", 5.0: "s", 8.0: "^"}


def frontier(points: Sequence[tuple[float, float, str]]) -> list[tuple[float, float, str]]:
    """The points no other point beats on both axes (lower is better on each)."""
    return sorted(p for p in points
                  if not any(q[0] <= p[0] and q[1] <= p[1] and q[:2] != p[:2] for q in points))


def draw(summaries: Sequence[Summary], path: Path, title: str = "") -> Path:
    import matplotlib  # noqa: PLC0415 - optional dependency
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    traces = sorted({s.trace for s in summaries})
    policies = sorted({s.policy for s in summaries})
    colours = {p: plt.get_cmap("tab10")(i % 10) for i, p in enumerate(policies)}
    fig, axes = plt.subplots(1, len(traces), figsize=(6.5 * len(traces), 5.5), squeeze=False)
    for ax, trace in zip(axes[0], traces, strict=True):
        mine = [s for s in summaries if s.trace == trace]
        for s in mine:
            ax.scatter(min(s.spend_vs_race, 3.0), min(s.wait_vs_race, 3.0),
                       marker=MARKERS.get(s.compress, "x"), color=colours[s.policy], s=60,
                       edgecolors="black", linewidths=0.5)
        for compress in sorted({s.compress for s in mine}):
            pts = frontier([(s.spend_vs_race, s.wait_vs_race, s.policy) for s in mine
                            if s.compress == compress])
            ax.plot([min(p[0], 3.0) for p in pts], [min(p[1], 3.0) for p in pts],
                    linestyle=":", color="grey", linewidth=1)
        ax.axhline(WAIT_TARGET, color="green", linewidth=0.8, linestyle="--")
        ax.axvline(SPEND_TARGET, color="green", linewidth=0.8, linestyle="--")
        ax.fill_between([0, SPEND_TARGET], 0, WAIT_TARGET, color="green", alpha=0.07)
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.set_xlabel(f"cloud spend / {RACE} (capped at 3)")
        ax.set_ylabel(f"p95 queue wait / {RACE} (capped at 3)")
        ax.set_title(trace)
    handles = [plt.Line2D([], [], marker="o", linestyle="", color=colours[p], label=p)
               for p in policies]
    handles += [plt.Line2D([], [], marker=m, linestyle="", color="grey", label=f"x{c:g}")
                for c, m in MARKERS.items()]
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 6), fontsize=8)
    fig.suptitle(title or "Held-out halves: p95 wait vs cloud spend, relative to the race "
                 "(green box: the target; dotted: the frontier per load)", fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 0.95))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
