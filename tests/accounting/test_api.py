"""API v1 accounting: usage (the caller's projects) and chargeback (finance and operators),
the same figures as the pages, as JSON and as the page's own CSV."""
from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse


MONTH = "2026-11"


def test_finance_gets_the_months_chargeback_as_json(trio, books, api):  # noqa: F811
    body = api(trio.finance).get(reverse("api-chargeback"), month=MONTH).json()
    assert body["months"] == [MONTH]
    lattice = [r for r in body["rows"] if r["project"] == "lattice"]
    assert {r["tenant"] for r in body["rows"]} == {trio.tenant.slug}
    a100 = next(r for r in lattice if r["gpu_class"] == "a100-80gb" or r["onprem_cost"] == 28.0)
    assert Decimal(str(a100["onprem_gpu_hours"])) == Decimal("14.00") and Decimal(str(a100["onprem_cost"])) == 28
    total = body["totals"]
    assert Decimal(str(total["cost"])) == sum(Decimal(str(r["cost"])) for r in body["rows"])


def test_a_rows_parts_add_up_to_its_cost_as_in_the_csv(trio, books, api):  # noqa: F811
    body = api(trio.finance).get(reverse("api-chargeback"), month=MONTH).json()
    parts = ("onprem_cost", "cloud_cost", "cloud_estimated_cost", "egress_cost")
    for row in [*body["rows"], body["totals"]]:
        assert sum(Decimal(str(row[p])) for p in parts) == Decimal(str(row["cost"])), row
        assert row["status"] in ("final", "estimated")


def test_chargeback_xlsx_is_the_pages_export(trio, books, api):  # noqa: F811
    from io import BytesIO  # noqa: PLC0415

    from openpyxl import load_workbook  # noqa: PLC0415

    client = api(trio.finance)
    response = client.get(reverse("api-chargeback"), month=MONTH, format="xlsx")
    assert response.status_code == 200 and response["Content-Type"].startswith("application/vnd.openxmlformats")
    page = client.client.get(reverse("chargeback-export"), {"first": MONTH, "months": 1, "format": "xlsx"})
    sheet = [list(r) for r in load_workbook(BytesIO(response.content)).active.iter_rows(values_only=True)]
    assert sheet == [list(r) for r in load_workbook(BytesIO(page.content)).active.iter_rows(values_only=True)]
    assert sheet[0][:3] == ["Month", "Tenant", "Project"]


def test_chargeback_csv_is_the_pages_export(trio, books, api):  # noqa: F811
    client = api(trio.finance)
    response = client.get(reverse("api-chargeback"), month=MONTH, format="csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    page = client.client.get(reverse("chargeback-export"), {"first": MONTH, "months": 1, "format": "csv"})
    assert page.status_code == 200 and response.content == page.content


@pytest.mark.parametrize("who", ["member", "owner"])
def test_chargeback_is_403_for_researchers_and_tenant_admins(trio, books, api, who):  # noqa: F811
    for fmt in ("json", "csv"):
        response = api(getattr(trio, who)).get(reverse("api-chargeback"), month=MONTH, format=fmt)
        assert response.status_code == 403 and response.json()["error"]["code"] == "permission_denied"


def test_outsider_finance_sees_none_of_tenant_a(trio, books, api):  # noqa: F811
    body = api(trio.outsider).get(reverse("api-chargeback"), month=MONTH).json()
    assert trio.tenant.slug not in {r["tenant"] for r in body["rows"]}
    response = api(trio.outsider).get(reverse("api-chargeback"), month=MONTH, tenant=trio.tenant.slug)
    assert response.status_code == 404


def test_operator_sees_every_tenant(trio, books, operator):  # noqa: F811
    from tests.conftest import JsonClient

    body = JsonClient(operator).get(reverse("api-chargeback"), month=MONTH).json()
    assert {trio.tenant.slug, trio.other_tenant.slug} <= {r["tenant"] for r in body["rows"]}


@pytest.mark.parametrize("params, field", [({"month": "2026-13"}, "month"), ({"month": "99999-01"}, "month"),
                                           ({"months": 2**64}, "months"), ({"months": 0}, "months"),
                                           ({"format": "xml"}, None)])
def test_bad_chargeback_parameters_are_400_or_404_never_500(trio, books, api, params, field):  # noqa: F811
    response = api(trio.finance).get(reverse("api-chargeback"), **params)
    if field is None:  # an unknown format: DRF's content negotiation finds no renderer
        assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    else:
        assert response.status_code == 400 and field in response.json()["error"]["fields"], response.content


def test_researcher_sees_their_projects_usage(trio, books, api):  # noqa: F811
    rows = api(trio.member).get(reverse("api-usage"), month=MONTH).json()["results"]
    assert rows and {r["project"] for r in rows} == {"lattice"}
    assert sum(Decimal(str(r["ended_gpu_hours"])) for r in rows) == Decimal("17.00")  # 14 + 1 on-prem, 2 cloud


def test_outsider_sees_no_usage_of_tenant_a(trio, books, api):  # noqa: F811
    rows = api(trio.outsider).get(reverse("api-usage"), month=MONTH).json()["results"]
    assert "lattice" not in {r["project"] for r in rows}


def test_bad_usage_month_is_400(trio, api):
    response = api(trio.member).get(reverse("api-usage"), month="Nov")
    assert response.status_code == 400 and "month" in response.json()["error"]["fields"]
