"""Chargeback as CSV and XLSX, from the same rows (and so the same totals) as the page."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

from openpyxl import Workbook

from accounting.chargeback import ChargebackReport

# "Cloud cost" is what matched bill lines charged; "Cloud cost estimated" prices the cloud
# GPU-hours no bill line covers yet ("Cloud GPU-hours estimated", part of "Cloud GPU-hours");
# "Egress cost" is the bills' data-transfer-out lines.  "Cost" adds all of them; "Status"
# says whether a row's cost is "final" or partly an estimate ("estimated").
HEADER = [
    "Month",
    "Tenant",
    "Project",
    "User",
    "GPU class",
    "On-prem GPU-hours",
    "On-prem cost",
    "Cloud GPU-hours",
    "Cloud cost",
    "Cloud GPU-hours estimated",
    "Cloud cost estimated",
    "Egress cost",
    "GPU-hours",
    "Cost",
    "Status",
]
NUMBER_COLUMNS = "FGHIJKLMN"


def _status(estimated: bool) -> str:
    return "estimated" if estimated else "final"


def _rows(report: ChargebackReport) -> list[list]:
    rows: list[list] = [
        [
            f"{r.month:%Y-%m}",
            r.tenant,
            r.project,
            r.user,
            r.gpu_class,
            r.onprem_hours,
            r.onprem_cost,
            r.cloud_hours,
            r.cloud_cost,
            r.cloud_estimated_hours,
            r.cloud_estimated_cost,
            r.egress_cost,
            r.gpu_hours,
            r.cost,
            _status(r.estimated),
        ]
        for r in report.rows
    ]
    t = report.totals
    rows.append(
        [
            "Total",
            "",
            "",
            "",
            "",
            t.onprem_hours,
            t.onprem_cost,
            t.cloud_hours,
            t.cloud_cost,
            t.cloud_estimated_hours,
            t.cloud_estimated_cost,
            t.egress_cost,
            t.gpu_hours,
            t.cost,
            _status(t.estimated),
        ]
    )
    return rows


def chargeback_csv(report: ChargebackReport) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(HEADER)
    for row in _rows(report):
        writer.writerow([f"{v:.2f}" if isinstance(v, Decimal) else v for v in row])
    # a BOM so spreadsheet programs read the UTF-8 tenant names correctly
    return ("\ufeff" + out.getvalue()).encode("utf-8")


def chargeback_xlsx(report: ChargebackReport) -> bytes:
    wb = Workbook()
    ws = wb.active
    ws.title = "Chargeback"
    ws.append(HEADER)
    for row in _rows(report):
        ws.append(row)
    for col in NUMBER_COLUMNS:
        for cell in ws[col][1:]:
            cell.number_format = "#,##0.00"
    ws.freeze_panes = "A2"
    out = io.BytesIO()
    wb.save(out)
    return out.getvalue()
