"""Plain-text tables and lines for the terminal."""

from __future__ import annotations

from typing import Iterable, Sequence


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    cells = [[_text(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip() for r in cells]
    return "\n".join(lines)


def _text(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".")
    return str(value)


def workload_status(w: dict) -> str:
    lines = [f"{w.get('id')}  {w.get('name')}  {w.get('state')}"]
    for label, key in (
        ("project", "project"),
        ("cluster", "cluster"),
        ("destination job", "destination_job_id"),
        ("created", "created_at"),
        ("started", "started_at"),
        ("ended", "ended_at"),
    ):
        if w.get(key) not in (None, ""):
            lines.append(f"  {label}: {w[key]}")
    spec = w.get("spec") or {}
    if spec.get("priority"):
        lines.append(
            f"  priority: {spec['priority']}"
            + (f" (class {spec['priority_class']})" if spec.get("priority_class") else "")
        )
    code = w.get("local_reason") or w.get("reason")
    if w.get("local_reason_text") or code:
        lines.append(f"  why: {w.get('local_reason_text') or code}" + (f" [{code}]" if code else ""))
    if w.get("raw_reason"):
        lines.append(f"  scheduler says: {w['raw_reason']}")
    outcome = w.get("outcome") or {}
    if outcome.get("summary"):
        lines.append(
            f"  how it ended: {outcome['summary']}"
            + (f" [{outcome['end_reason']}]" if outcome.get("end_reason") else "")
        )
    if outcome.get("gpu_hours") is not None:
        lines.append(f"  run time: {outcome['run_seconds']:g} s, {outcome['gpu_hours']:g} GPU-hours")
    return "\n".join(lines)


def explain(e: dict) -> str:
    chosen = e.get("chosen")
    parts = [
        f"policy {e.get('policy_version', '?')}; chosen: "
        + (f"{chosen.get('cluster')}/{chosen.get('pool')}" if chosen else "none yet")
    ]
    candidates = e.get("candidates") or []
    terms = sorted({name for c in candidates for name in (c.get("terms") or {})})
    if candidates:
        parts += [
            "",
            "Ranking",
            table(
                ["#", "cluster", "pool", "score", *terms],
                [
                    [
                        i,
                        c.get("cluster"),
                        c.get("pool"),
                        c.get("score"),
                        *[(c.get("terms") or {}).get(t) for t in terms],
                    ]
                    for i, c in enumerate(candidates, 1)
                ],
            ),
        ]
    excluded = e.get("excluded") or []
    if excluded:
        parts += [
            "",
            "Excluded",
            table(
                ["cluster", "rule", "detail"], [[x.get("cluster"), x.get("rule"), x.get("detail")] for x in excluded]
            ),
        ]
    if not candidates and not excluded:
        parts.append("no placement decision yet")
    return "\n".join(parts)


def preview(p: dict) -> str:
    """``submit --dry-run``: the destinations a submission made now would be ranked on."""
    chosen = p.get("chosen")
    quota = p.get("quota") or {}
    parts = [
        f"dry run, nothing submitted; policy {p.get('policy_version', '?')}; would go to: "
        + (f"{chosen.get('cluster')}/{chosen.get('pool')}" if chosen else f"nowhere now ({p.get('reason')})"),
        f"quota left: {quota.get('remaining')} of {quota.get('limit')} {quota.get('gpu_class')} GPUs",
    ]
    parts += [f"warning: {w}" for w in p.get("warnings") or []]
    parts += [
        f"budget {b.get('name')}: {b.get('used_hours')} used + {b.get('held_hours')} held + "
        f"{b.get('asked_hours')} this job of {b.get('gpu_hours')} GPU-h ({b.get('kind')})"
        for b in p.get("budgets") or []
    ]
    topology = any(d.get("topology") for d in p.get("destinations") or [])
    rows = [
        [
            d.get("rank"),
            d.get("cluster"),
            d.get("pool"),
            d.get("score"),
            d.get("expected_start"),
            d.get("queue_wait_s"),
            d.get("gpu_hours"),
            d.get("rate_per_gpu_hour"),
            d.get("egress_cost"),
            d.get("expected_cost"),
        ]
        + ([d.get("topology")] if topology else [])
        for d in p.get("destinations") or []
    ]
    if rows:
        head = ["#", "cluster", "pool", "score", "expected start", "wait s", "GPU-h", "rate", "egress", "cost"]
        parts += ["", table(head + (["preferred level"] if topology else []), rows)]
    excluded = p.get("excluded") or []
    if excluded:
        parts += [
            "",
            "Excluded",
            table(
                ["cluster", "rule", "detail"], [[x.get("cluster"), x.get("rule"), x.get("detail")] for x in excluded]
            ),
        ]
    return "\n".join(parts)


def budgets(rows: list[dict]) -> str:
    """``gpubroker budgets``: each GPU-hour budget's burn-down and forecast."""
    if not rows:
        return "no GPU-hour budget covers your tenants"
    keys = [
        "name",
        "kind",
        "start",
        "end",
        "gpu_hours",
        "used_hours",
        "used_cost",
        "held_hours",
        "remaining_hours",
        "forecast_hours",
    ]
    return table(
        ["budget", "kind", "from", "to", "GPU-h", "used", "used cost", "held", "remaining", "forecast"],
        [[b.get(k) for k in keys] for b in rows],
    )
