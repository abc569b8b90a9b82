"""Small bar charts drawn as inline SVG on the server: no JavaScript, nothing external."""
from __future__ import annotations

from decimal import Decimal
from typing import Sequence

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

SERIES_COLOURS = ("#3b6fd6", "#e39b2d")  # on-prem, cloud
_W, _H, _LEFT, _BOTTOM, _TOP = 640, 220, 56, 28, 24


def stacked_bars(*, title: str, unit: str, labels: Sequence[str], series: dict[str, Sequence[Decimal]]) -> SafeString:
    """One bar per label, stacked by series (e.g. on-prem and cloud), with a y-axis maximum."""
    names = list(series)
    totals = [sum((series[n][i] for n in names), Decimal("0")) for i in range(len(labels))]
    top = max(totals, default=Decimal("0")) or Decimal("1")
    plot_h = _H - _BOTTOM - _TOP
    slot = (_W - _LEFT - 8) / max(1, len(labels))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_W} {_H}" width="100%" role="img" '
             f'aria-label="{escape(title)}" style="max-width:{_W}px;background:#fff">',
             f'<title>{escape(title)}</title>',
             f'<text x="{_LEFT}" y="16" font-size="13" font-weight="600">{escape(title)}</text>',
             f'<line x1="{_LEFT}" y1="{_TOP + plot_h}" x2="{_W - 8}" y2="{_TOP + plot_h}" stroke="#999"/>',
             f'<text x="{_LEFT - 4}" y="{_TOP + 10}" font-size="10" text-anchor="end">{_fmt(top)}</text>',
             f'<text x="{_LEFT - 4}" y="{_TOP + plot_h}" font-size="10" text-anchor="end">0</text>']
    for i, label in enumerate(labels):
        parts += _bar(i, label, [(n, series[n][i]) for n in names], top, slot, plot_h, unit)
    parts += _legend(names)
    parts.append("</svg>")
    return mark_safe("".join(parts))  # every piece of text above went through escape()


def _bar(i: int, label: str, values: list[tuple[str, Decimal]], top: Decimal, slot: float,
         plot_h: int, unit: str) -> list[str]:
    x = _LEFT + i * slot + slot * 0.15
    width = slot * 0.7
    y = float(_TOP + plot_h)
    parts = []
    for k, (name, value) in enumerate(values):
        h = float(value / top) * plot_h if value > 0 else 0.0
        y -= h
        parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{h:.1f}" '
                     f'fill="{SERIES_COLOURS[k % len(SERIES_COLOURS)]}"><title>{escape(label)} '
                     f'{escape(name)}: {_fmt(value)} {escape(unit)}</title></rect>')
    parts.append(f'<text x="{x + width / 2:.1f}" y="{_H - 10}" font-size="10" text-anchor="middle">'
                 f'{escape(label)}</text>')
    return parts


def _legend(names: list[str]) -> list[str]:
    parts = []
    for k, name in enumerate(names):
        x = _W - 180 + k * 90
        parts.append(f'<rect x="{x}" y="6" width="10" height="10" fill="{SERIES_COLOURS[k % len(SERIES_COLOURS)]}"/>'
                     f'<text x="{x + 14}" y="15" font-size="11">{escape(name)}</text>')
    return parts


def _fmt(value: Decimal) -> str:
    return f"{value:,.2f}" if value < 1000 else f"{value:,.0f}"


def chargeback_charts(report) -> dict[str, SafeString]:
    """Cost and GPU-hours per month of a ChargebackReport, on-prem vs cloud."""
    labels = [f"{m:%Y-%m}" for m in report.months]
    months = [report.by_month[m] for m in report.months]
    return {
        "cost": stacked_bars(title="Cost per month", unit="", labels=labels, series={
            "On-prem": [t.onprem_cost for t in months], "Cloud": [t.cloud_cost for t in months]}),
        "hours": stacked_bars(title="GPU-hours per month", unit="GPU-h", labels=labels, series={
            "On-prem": [t.onprem_hours for t in months], "Cloud": [t.cloud_hours for t in months]}),
    }
