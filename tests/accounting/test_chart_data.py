"""Chargeback charts: cloud spend against the budget and the on-prem TCO, GPU-hours per month."""
from __future__ import annotations

import json
import re
from datetime import date, datetime, timezone as tz
from decimal import Decimal

import pytest
from django.urls import reverse

from accounting import selectors
from accounting.chart_data import chargeback_chart_data
from portal.metrics.models import FigureSample

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.accounting.urls")]
NOV = "?first=2026-11&months=1"


def data_for(user, tenant_slug: str = "") -> dict:
    report = selectors.chargeback_report(user=user, first=date(2026, 10, 1), months=2, tenant_slug=tenant_slug)
    return chargeback_chart_data(user=user, report=report, tenant_slug=tenant_slug)


def test_spend_hours_and_tco_per_month_from_the_report(trio, books):
    trio.tenant.cloud_budget_month = Decimal("150.00")
    trio.tenant.save()
    data = data_for(trio.finance)
    assert data["months"] == ["2026-10", "2026-11"]
    assert data["cloud_spend"] == [0.0, 165.03] and data["cloud_hours"] == [0.0, 2.0]
    assert data["cloud_estimated"] == [0.0, 0.0]  # the cloud job's bill is in
    assert data["onprem_hours"] == [1.0, 15.0]
    # 2 cloud GPU-hours of a100-80gb at the on-prem rate of 2.00 per GPU-hour
    assert data["onprem_tco"] == [0.0, 4.0] and data["warning_band"] == [0.6, 0.7]
    assert data["budget"] == 150.0


def test_budget_and_month_to_date_spend_are_the_users_tenants_only(trio, books):
    trio.tenant.cloud_budget_month = Decimal("150.00")
    trio.tenant.save()
    trio.other_tenant.cloud_budget_month = Decimal("999.00")
    trio.other_tenant.save()
    at = datetime(2026, 11, 15, tzinfo=tz.utc)
    FigureSample.objects.create(taken_at=at, tenant=trio.tenant, queue_depth=0, started=0, cloud_spend_month=12)
    FigureSample.objects.create(taken_at=at, tenant=trio.other_tenant, queue_depth=0, started=0, cloud_spend_month=700)
    mine, theirs = data_for(trio.finance), data_for(trio.outsider)
    assert (mine["budget"], mine["month_to_date"]["spend"]) == (150.0, [12.0])
    assert (theirs["budget"], theirs["month_to_date"]["spend"]) == (999.0, [700.0])


def test_no_budget_set_is_none_not_zero(trio, books):
    assert data_for(trio.finance)["budget"] is None


def test_chargeback_page_carries_the_chart_data_and_says_when_there_are_no_samples(trio, books, login):
    body = login(trio.finance).get(reverse("chargeback") + NOV).content.decode()
    match = re.search(r'<script id="chargeback-chart-data" type="application/json">(.*?)</script>', body, re.S)
    assert match and json.loads(match.group(1))["cloud_spend"] == [165.03]
    assert "No samples yet for 2026-11" in body and "vendor/uplot/uPlot.iife.min.js" in body


def test_unbilled_cloud_hours_count_in_the_spend_as_estimated(trio, books, cloud):
    from accounting.services.usage import usage_ingest
    from tests.accounting.helpers import usage

    usage_ingest(cluster=cloud, records=[usage("lattice/b2", cluster="aws-eu", source="kueue", gpus=2, seconds=3600)])
    data = data_for(trio.finance)
    assert data["cloud_estimated"] == [0.0, 8.0]  # 2 GPU-hours at the cloud's 4.00, until the bill comes
    assert data["cloud_spend"] == [0.0, 173.03] and data["onprem_tco"] == [0.0, 8.0]
