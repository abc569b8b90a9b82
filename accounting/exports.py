"""Chargeback as CSV and XLSX, from the same rows (and so the same totals) as the page."""
from __future__ import annotations

import csv
import io
from decimal import Decimal

from openpyxl import Workbook

from accounting.chargeback import ChargebackReport

HEADER = ["Month", "Tenant", "Project", "GPU class", "On-prem GPU-hours", "On-prem cost",
          "Cloud GPU-hours", "Cloud cost", "GPU-hours", "Cost"]


def _rows(report: ChargebackReport) -> list[list]:
    rows: list[list] = [
        [f"{r.month:%Y-%m}", r.tenant, r.project, r.gpu_class, r.onprem_hours, r.onprem_cost,
         r.cloud_hours, r.cloud_cost, r.gpu_hours, r.cost] for r in report.rows]
    t = report.totals
    rows.append(["Total", "", "", "", t.onprem_hours, t.onprem_cost, t.cloud_hours, t.cloud_cost,
                 t.gpu_hours, t.cost])
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
    for col in "EFGHIJ":
        for cell in ws[col][1:]:
            cell.number_format = "#,##0.00"
    ws.freeze_panes = "A2"
    out = io.BytesIO()
    wb.save(out)
    return out.getvalue()
