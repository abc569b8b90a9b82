"""Data for the chargeback page's charts, passed to the page as JSON (``json_script``).

- cloud spend per month against the tenants' monthly cloud budget and against what the
  same GPU-hours cost on-prem at the class's TCO rate, with the 60% and 70% lines: cloud
  spend above that band of the on-prem TCO is the usual sign that owning the GPUs is cheaper;
- this month's cloud spend so far (sampled on the beat schedule) against the budget;
- on-prem vs cloud GPU-hours per month.
"""

from __future__ import annotations

from decimal import Decimal

from accounting import selectors
from accounting.chargeback import ChargebackReport, onprem_tco_of_cloud_hours
from accounting.periods import month_bounds
from portal.metrics.selectors import spend_history
from portal.tenancy.access import AnyUser

WARNING_BAND = (0.6, 0.7)


def chargeback_chart_data(*, user: AnyUser, report: ChargebackReport, tenant_slug: str = "") -> dict:
    tenants = selectors.finance_tenants(user=user)  # the report's scope: 403 for anyone without finance
    if tenant_slug:
        tenants = tenants.filter(slug=tenant_slug)
    budgets = [t for t in tenants.values_list("cloud_budget_month", flat=True) if t is not None]
    budget = float(sum(budgets, Decimal("0"))) if budgets else None
    labels = [f"{m:%Y-%m}" for m in report.months]
    totals = [report.by_month[m] for m in report.months]
    tco = onprem_tco_of_cloud_hours(report)
    last = report.months[-1]
    since, until = month_bounds(last)
    scoped_ids = (
        None
        if selectors.finance_scope(user=user).tenant_ids is None and not tenant_slug
        else set(tenants.values_list("id", flat=True))
    )
    return {
        "months": labels,
        "budget": budget,
        "warning_band": list(WARNING_BAND),
        # everything the cloud costs (billed, estimated until billed, egress) and the estimated part
        "cloud_spend": [float(t.cloud_spend) for t in totals],
        "cloud_estimated": [float(t.cloud_estimated_cost) for t in totals],
        "onprem_tco": [float(tco[m]) for m in report.months],
        "onprem_hours": [float(t.onprem_hours) for t in totals],
        "cloud_hours": [float(t.cloud_hours) for t in totals],
        "month_to_date": {"month": f"{last:%Y-%m}", **spend_history(tenant_ids=scoped_ids, since=since, until=until)},
    }
