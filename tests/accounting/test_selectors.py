"""Chargeback and usage selectors: hand-computed figures and tenant scoping."""
from __future__ import annotations

from datetime import date
from decimal import Decimal as D

import pytest
from django.core.exceptions import PermissionDenied
from django.http import Http404

from accounting import selectors
from accounting.services.rates import rate_set

pytestmark = pytest.mark.django_db
OCT, NOV = date(2026, 10, 1), date(2026, 11, 1)


def _table(report) -> dict[tuple, tuple]:
    return {(f"{r.month:%m}", r.tenant, r.project, r.gpu_class):
            (r.onprem_hours, r.onprem_cost, r.cloud_hours, r.cloud_cost) for r in report.rows}


def test_finance_sees_its_tenant_figures_by_hand(trio, books):
    report = selectors.chargeback_report(user=trio.finance, first=OCT, months=2)
    assert _table(report) == {
        ("10", "physics", "lattice", "a100-80gb"): (D("1.00"), D("2.00"), D("0.00"), D("0.00")),
        ("11", "physics", "lattice", "a100-80gb"): (D("14.00"), D("28.00"), D("2.00"), D("65.55")),
        ("11", "physics", "lattice", "unclassified"): (D("1.00"), D("1.20"), D("0.00"), D("0.04")),
        ("11", "physics", "(unassigned)", "unclassified"): (D("0.00"), D("0.00"), D("0.00"), D("99.44")),
    }
    t = report.totals
    assert (t.onprem_hours, t.onprem_cost, t.cloud_hours, t.cloud_cost) == (
        D("16.00"), D("31.20"), D("2.00"), D("165.03"))
    assert (t.gpu_hours, t.cost) == (D("18.00"), D("196.23"))
    assert report.by_month[OCT].cost == D("2.00") and report.by_month[NOV].cost == D("194.23")


def test_cluster_rate_wins_and_later_rate_applies_from_its_date(trio, books, gpu_class, onprem):
    rate_set(gpu_class=gpu_class, cluster=onprem, price_per_gpu_hour=D("3.00"), valid_from=date(2026, 11, 1))
    report = selectors.chargeback_report(user=trio.finance, first=OCT, months=2, tenant_slug="physics",
                                         project_slug="lattice")
    table = _table(report)
    assert table[("10", "physics", "lattice", "a100-80gb")][1] == D("2.00")
    assert table[("11", "physics", "lattice", "a100-80gb")][1] == D("42.00")
    assert all(key[2] == "lattice" for key in table)


def test_tenants_are_isolated(trio, books):
    theirs = _table(selectors.chargeback_report(user=trio.outsider, first=NOV, months=1))
    assert {key[1] for key in theirs} == {"biology"}
    assert theirs[("11", "biology", "genomes", "a100-80gb")] == (D("2.00"), D("4.00"), D("0.00"), D("0.00"))
    assert theirs[("11", "biology", "(unassigned)", "a100-80gb")][3] == D("11.76")
    with pytest.raises(Http404):
        selectors.chargeback_report(user=trio.outsider, first=NOV, months=1, tenant_slug="physics")
    for user in (trio.member, trio.owner):
        with pytest.raises(PermissionDenied):
            selectors.chargeback_report(user=user, first=NOV, months=1)


def test_operator_sees_everything_including_unassigned_usage(books, operator):
    table = _table(selectors.chargeback_report(user=operator, first=NOV, months=1))
    assert {key[1] for key in table} == {"physics", "biology", "(unassigned)"}
    assert table[("11", "(unassigned)", "(unassigned)", "a100-80gb")][:2] == (D("1.00"), D("2.00"))


def test_usage_mine_shows_only_my_projects(trio, books):
    (line_a100, line_other) = selectors.usage_mine(user=trio.member, month=NOV)
    assert line_a100.project == trio.project and line_a100.gpu_class == "a100-80gb"
    assert (line_a100.ended_hours, line_a100.jobs) == (D("16.00"), 3)  # 14 on-prem + 2 cloud
    assert (line_other.gpu_class, line_other.ended_hours) == ("unclassified", D("1.00"))
    assert [u.project for u in selectors.usage_mine(user=trio.outsider, month=NOV)] == [trio.other_project]


def test_bills_are_scoped(trio, books, operator):
    assert list(selectors.bill_list(user=trio.finance)) == [books.bill]
    assert selectors.bill_list(user=operator).count() == 2
    with pytest.raises(Http404):
        selectors.bill_get(user=trio.outsider, bill_id=books.bill.id)
