"""CSV and XLSX exports open as such and carry the same totals as the page."""
from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest
from django.urls import reverse
from openpyxl import load_workbook

from accounting.exports import HEADER

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.accounting.urls")]
QUERY = "?first=2026-10&months=2"
MONEY = ["On-prem GPU-hours", "On-prem cost", "Cloud GPU-hours", "Cloud cost", "GPU-hours", "Cost"]


def _page_totals(client) -> dict[str, Decimal]:
    t = client.get(reverse("chargeback") + QUERY).context["report"].totals
    return dict(zip(MONEY, (t.onprem_hours, t.onprem_cost, t.cloud_hours, t.cloud_cost, t.gpu_hours, t.cost)))


def _check(rows: list[list], page: dict[str, Decimal]) -> None:
    assert rows[0] == HEADER
    body, total = rows[1:-1], rows[-1]
    assert total[0] == "Total" and len(body) == 4
    for name in MONEY:
        i = HEADER.index(name)
        column = sum(Decimal(str(r[i])).quantize(Decimal("0.01")) for r in body)
        assert column == page[name] == Decimal(str(total[i])).quantize(Decimal("0.01")), name


def test_csv_export(trio, books, login):
    client = login(trio.finance)
    response = client.get(reverse("chargeback-export") + QUERY + "&format=csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert 'filename="chargeback-2026-10-2m.csv"' in response["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(response.content.decode("utf-8-sig"))))
    _check(rows, _page_totals(client))
    assert _page_totals(client)["Cost"] == Decimal("196.23")


def test_xlsx_export(trio, books, login):
    client = login(trio.finance)
    response = client.get(reverse("chargeback-export") + QUERY + "&format=xlsx")
    assert response.status_code == 200 and "spreadsheetml" in response["Content-Type"]
    sheet = load_workbook(io.BytesIO(response.content)).active
    rows = [list(r) for r in sheet.iter_rows(values_only=True)]
    _check(rows, _page_totals(client))


def test_unknown_format_is_a_bad_request(trio, login):
    assert login(trio.finance).get(reverse("chargeback-export") + "?format=pdf").status_code == 400


def test_outsider_export_has_none_of_our_rows(trio, books, login):
    response = login(trio.outsider).get(reverse("chargeback-export") + QUERY + "&format=csv")
    assert "physics" not in response.content.decode("utf-8-sig")
