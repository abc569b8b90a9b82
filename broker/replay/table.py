"""The replay report as a Markdown table, with a header that says how it was made."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from broker.replay.lower_bound import replay_wait_bound_s
from broker.replay.metrics import Metrics, busy_window, offered_load, whole_gpus
from broker.replay.priorities import PREEMPT_VARIANT
from broker.replay.runner import ReplayReport

COLUMNS = (
    "policy",
    "mean wait (min)",
    "p95 wait (min)",
    "p95 wait gangs (min)",
    "mean TTFG (min)",
    "p95 TTFG (min)",
    "failed at dest (frag+rej)",
    "held at dest",
    "never placed",
)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:,.1f}"


NOT_CALIBRATED = "Simulator: no calibration against a real scheduler recorded here (docs/simulator.md)."


def calibration_words(
    control_plane: str, commit: str, recorded: str, pair_order: float, median_s: float, repetitions: int
) -> str:
    return (
        f"Simulator: calibrated against {control_plane} at commit {commit or '?'} ({recorded}; "
        f"docs/simulator.md): {pair_order:.0%} of job pairs started in the same order, median start error "
        f"{median_s:.1f} s, medians of {repetitions} repetitions."
    )


def header(report: ReplayReport) -> list[str]:
    cfg, fleet = report.config, report.fleet
    gangs = sum(j.workers > 1 for j in report.jobs)
    local = sum(j.local for j in report.jobs)
    start, end = busy_window(report.jobs)
    load = offered_load(report.jobs)
    gpus = whole_gpus(fleet)
    scenario = []
    if cfg.scenario:
        mix = ", ".join(f"{c} {v:.0%}" for c, v in cfg.scenario.mix.items()) or "none"
        shares = ", ".join(f"{t} {v:.0%}" for t, v in cfg.scenario.min_shares.items()) or "none"
        takes = ", ".join(cfg.scenario.preemptible) or "the policy file's"
        scenario = [
            f"Priority scenario: fleet priority classes drawn over the jobs ({mix}; the rest none, i.e. normal); "
            f"guaranteed minimum shares: {shares}; preemptible priorities: {takes}; {PREEMPT_VARIANT} is the "
            "policy file with the broker owning preemption on every cluster (docs/replay.md)."
        ]
    return [
        f"Trace: {Path(cfg.trace).name}: {len(report.jobs):,} GPU jobs replayed "
        f"({gangs:,} gangs) of {report.rows:,} rows; {report.skipped.describe()}.",
        f"Synthetic mix: {report.synth.describe()}.",
        f"Local users: {local:,} of the jobs ({cfg.local_share:.0%} drawn) went straight into a cluster's own queue, "
        "never seen by the broker; the policies are scored on the rest, the local jobs' own waits are below.",
        f"Broker loop: {LOOP_WORDS[cfg.loop]}.",
        f"Fleet: {Path(cfg.fleet).name}: {', '.join(fleet.names)}; {gpus} whole GPUs.",
        f"Time: {cfg.time.describe()}; waits in minutes of replay time.",
        f"Busy window (5th-95th percentile of arrivals): {(end - start) / 3600:,.1f} h, "
        f"offered load {load:,.1f} GPUs ({load / gpus if gpus else 0:.0%} of the fleet); "
        f"GPU util is measured over it.",
        f"Lower bound on the mean wait of the broker's jobs (local users' left out) on this fleet "
        f"(no policy can beat it; "
        f'docs/replay.md, "The lower bound"): {_minutes(replay_wait_bound_s(report.jobs, fleet, report.classes))} min.',
        *scenario,
    ]


LOOP_WORDS = {
    "production": "production (beat's syncs, polls and passes on their intervals, a worker for the follow-ups; "
    "the broker learns only from its own reports; docs/replay.md)",
    "instant": "instant (the older harness: synced right before placing, offered a job only where the simulator "
    "said it fitted now)",
}
SIDE_COLUMNS = ("policy", "local jobs", "local mean wait (min)", "local p95 wait (min)", "max tenant-month cloud spend")


def side_table(report: ReplayReport) -> str:
    """What each policy did to the jobs it never saw, and its tenants' cloud spend by month."""
    budget = report.config.cloud_budget
    columns = [*SIDE_COLUMNS, *(["tenant-months over the budget"] if budget is not None else [])]
    lines = ["| " + " | ".join(columns) + " |", "|---|" + "---:|" * (len(columns) - 1)]
    for m in report.metrics:
        e = m.extra
        cells = [
            m.policy,
            f"{e.get('local jobs', 0):,}",
            _minutes(e.get("local mean wait s", 0)),
            _minutes(e.get("local p95 wait s", 0)),
            f"{e.get('max tenant-month cloud spend', 0):,}",
        ]
        if budget is not None:
            cells.append(f"{e.get('tenant-months over budget', 0):,} (budget {budget:,.0f})")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _row(m: Metrics, clusters: Sequence[str]) -> list[str]:
    failed = f"{m.failed_at_destination:,} ({m.fragmented:,}+{m.rejected:,})"
    waits = (m.mean_wait_s, m.p95_wait_s, m.p95_gang_wait_s, m.mean_ttfg_s, m.p95_ttfg_s)
    return [
        m.policy,
        *map(_minutes, waits),
        failed,
        f"{m.held_at_destination:,}",
        f"{m.never_placed:,}",
        *(f"{m.gpu_hours.get(c, 0.0):,.0f}" for c in clusters),
        f"{m.cloud_spend:,.0f}",
        f"{m.utilisation:.1%}",
    ]


def markdown_table(report: ReplayReport) -> str:
    clusters = report.fleet.names
    columns = [*COLUMNS, *(f"GPU-h {c}" for c in clusters), "cloud spend", "GPU util"]
    lines = [
        "| " + " | ".join(columns) + " |",
        "|" + "|".join("---" if i == 0 else "---:" for i in range(len(columns))) + "|",
    ]
    lines += ["| " + " | ".join(_row(m, clusters)) + " |" for m in report.metrics]
    return "\n".join(lines)


def breakdown_table(report: ReplayReport, shapes: bool = False) -> str:
    """Waits per GPU class, single jobs and gangs apart (``shapes``: per gang shape, workers x
    GPUs each): jobs, mean and p95 (min)."""
    of = (lambda m: m.by_gang_shape) if shapes else (lambda m: m.by_group)
    groups = sorted({g for m in report.metrics for g in of(m)})
    lines = ["| policy | " + " | ".join(f"{g}: n / mean / p95" for g in groups) + " |", "|---|" + "---:|" * len(groups)]
    for m in report.metrics:
        cells = []
        for g in groups:
            n, avg, p95 = of(m).get(g, (0, 0.0, 0.0))
            cells.append(f"{n:,} / {_minutes(avg)} / {_minutes(p95)}")
        lines.append(f"| {m.policy} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


PREEMPTION_COLUMNS = ("preempted jobs", "preemptions", "GPU-h lost to preemption")


def priority_table(report: ReplayReport) -> str:
    """The priority scenario: the broker's jobs' waits per fleet priority class (n / mean /
    p95, minutes), and what preemption cost the jobs it hit."""
    classes = sorted({c for m in report.metrics for c in m.by_priority})
    tenants = list(report.config.scenario.min_shares)
    columns = [
        *(f"{c}: n / mean / p95" for c in classes),
        *(f"tenant {t} (min share): n / mean / p95" for t in tenants),
        *PREEMPTION_COLUMNS,
        "preempted: mean / p95 delay",
        "never ended",
    ]
    lines = ["| policy | " + " | ".join(columns) + " |", "|---|" + "---:|" * len(columns)]
    for m in report.metrics:
        e = m.extra
        cells = []
        for c in classes:
            n, avg, p95 = m.by_priority.get(c, (0, 0.0, 0.0))
            cells.append(f"{n:,} / {_minutes(avg)} / {_minutes(p95)}")
        for t in tenants:
            n, avg, p95 = m.by_tenant.get(t, (0, 0.0, 0.0))
            cells.append(f"{n:,} / {_minutes(avg)} / {_minutes(p95)}")
        cells += [f"{e.get(k, 0):,}" for k in PREEMPTION_COLUMNS]
        cells.append(f"{_minutes(e.get('preempted mean delay s', 0))} / {_minutes(e.get('preempted p95 delay s', 0))}")
        cells.append(f"{e.get('preempted never ended', 0):,}")
        lines.append(f"| {m.policy} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render(report: ReplayReport, breakdown: bool = False, calibration: str = "") -> str:
    """``calibration``: which calibration against a real scheduler the simulator passed
    (``calibration_words``), said above the figures that rest on it."""
    parts = [*header(report), calibration or NOT_CALIBRATED, "", markdown_table(report), "", side_table(report)]
    if breakdown:
        parts += ["", "Waits by GPU class (minutes):", "", breakdown_table(report)]
        parts += ["", "Gang waits by shape, workers x GPUs each (minutes):", "", breakdown_table(report, shapes=True)]
    if report.config.scenario:
        parts += ["", "The broker's jobs by priority class, and what preemption cost (minutes):", ""]
        parts += [priority_table(report)]
    return "\n".join(parts) + "\n"
