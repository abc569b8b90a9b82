"""Accounting that shows what it does not know yet: cloud hours with no bill line carry an
estimate from rates, marked estimated, until the bill arrives; egress is a column of its own;
the chargeback page says, per month and cluster, whether the bill is in and what
reconciliation found."""
from __future__ import annotations

import csv
import io
from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.urls import reverse

from accounting.chargeback import build_report
from accounting.exports import HEADER
from accounting.services.bills import bill_import
from accounting.services.rates import rate_set
from accounting.services.reconciliation import reconciliation_run
from accounting.services.usage import usage_ingest
from tests.accounting.helpers import FIXTURES, T0, usage
from tests.factories import WorkloadFactory

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.accounting.urls")]
NOVEMBER = date(2026, 11, 1)
QUERY = "?first=2026-11&months=1"


@pytest.fixture
def unbilled(trio, gpu_class, cloud):
    """4 GPUs x 0.5 h on the cloud cluster (list price 4.00/GPU-h) and no bill yet."""
    wl = WorkloadFactory(project=trio.project, gpu_class=gpu_class, cluster=cloud, uid="wl-00000000000000a1",
                         total_gpus=4, state="completed", started_at=T0, ended_at=T0 + timedelta(seconds=1800))
    usage_ingest(cluster=cloud, records=[usage("lattice/a1", cluster="aws-eu", source="kueue", gpus=4,
                                               seconds=1800, workload_id=wl.uid)])
    return wl


def _import(name: str, provider: str, trio, cloud):
    with (FIXTURES / name).open("rb") as f:
        return bill_import(provider=provider, file_name=name, content=f, tenant=trio.tenant, cluster=cloud).bill


def test_cloud_hours_without_a_bill_line_carry_an_estimate_marked_estimated(trio, unbilled):
    report = build_report(months=[NOVEMBER], tenant_ids={trio.tenant.id})
    (row,) = report.rows
    assert row.cloud_hours == Decimal("2.00") and row.cloud_cost == Decimal("0.00")
    assert row.estimated and row.cloud_estimated_hours == Decimal("2.00")
    assert row.cloud_estimated_cost == Decimal("8.00")  # 2 GPU-h at the cluster's 4.00
    assert report.totals.cost == Decimal("8.00") and report.totals.estimated


def test_estimate_is_the_cloud_price_not_the_on_prem_class_rate(trio, gpu_class, unbilled):
    rate_set(gpu_class=gpu_class, price_per_gpu_hour=Decimal("1.00"), valid_from=date(2026, 1, 1))  # on-prem TCO
    (row,) = build_report(months=[NOVEMBER], tenant_ids={trio.tenant.id}).rows
    assert row.cloud_estimated_cost == Decimal("8.00")


def test_estimate_gives_way_to_the_bill_once_it_arrives(trio, cloud, unbilled):
    _import("aws_cur.csv", "aws", trio, cloud)
    report = build_report(months=[NOVEMBER], tenant_ids={trio.tenant.id})
    row = next(r for r in report.rows if r.gpu_class != "unclassified")
    assert not row.estimated and row.cloud_estimated_cost == Decimal("0.00")
    assert row.cloud_cost == Decimal("65.55")  # the two p4d lines of workload a1
    assert not report.totals.estimated


def test_egress_is_its_own_column_not_gpu_cost(trio, cloud):
    _import("azure_cost_details.csv", "azure", trio, cloud)
    report = build_report(months=[NOVEMBER], tenant_ids={trio.tenant.id})
    assert report.totals.egress_cost == Decimal("1.00")  # "Bandwidth / Standard Data Transfer Out"
    assert report.totals.cloud_cost == Decimal("57.02")  # the ND96 and NC4 lines, no egress
    assert report.totals.cost == Decimal("58.02")


def test_chargeback_page_marks_estimates_and_shows_egress(trio, unbilled, login):
    body = login(trio.finance).get(reverse("chargeback") + QUERY).content.decode()
    assert 'class="estimated"' in body and "Egress" in body and 'data-estimated="8.00"' in body


def test_exports_carry_estimate_egress_and_status_columns(trio, unbilled, login):
    response = login(trio.finance).get(reverse("chargeback-export") + QUERY + "&format=csv")
    header, row, total = list(csv.reader(io.StringIO(response.content.decode("utf-8-sig"))))
    assert header == HEADER
    assert row[HEADER.index("Cloud cost estimated")] == "8.00" and row[HEADER.index("Status")] == "estimated"
    assert row[HEADER.index("Egress cost")] == "0.00"
    assert total[HEADER.index("Cost")] == "8.00" and total[HEADER.index("Status")] == "estimated"


def test_chargeback_page_shows_reconciliation_status_per_month(trio, onprem, cloud, unbilled, login):
    client = login(trio.finance)
    body = client.get(reverse("chargeback") + QUERY).content.decode()
    assert 'data-cluster="aws-eu"' in body and "awaiting bill" in body and "not reconciled" in body

    reconciliation_run(cluster_id=cloud.id, period=NOVEMBER)
    rows = {(s.cluster.name, s.month): s for s in client.get(reverse("chargeback") + QUERY).context["reconciliation"]}
    assert rows[("aws-eu", NOVEMBER)].run is not None and rows[("aws-eu", NOVEMBER)].bill == "awaiting"
    assert rows[("hpc", NOVEMBER)].status == "not reconciled" and rows[("hpc", NOVEMBER)].bill == ""

    _import("aws_cur.csv", "aws", trio, cloud)
    reconciliation_run(cluster_id=cloud.id, period=NOVEMBER)
    status = {s.cluster.name: s for s in client.get(reverse("chargeback") + QUERY).context["reconciliation"]}
    assert status["aws-eu"].bill == "imported" and status["aws-eu"].discrepancies >= 1  # the p5/g5 lines


def test_outsider_sees_no_discrepancy_of_ours_in_the_status(trio, cloud, unbilled, login):
    _import("aws_cur.csv", "aws", trio, cloud)
    reconciliation_run(cluster_id=cloud.id, period=NOVEMBER)
    response = login(trio.outsider).get(reverse("chargeback") + QUERY)
    status = {s.cluster.name: s for s in response.context["reconciliation"]}
    assert status["aws-eu"].discrepancies == 0 and status["aws-eu"].status == "reconciled"
    assert "physics" not in response.content.decode().split('id="reconciliation-status"')[1]


def test_researcher_cannot_open_the_chargeback_page(trio, login):
    assert login(trio.member).get(reverse("chargeback") + QUERY).status_code == 403
