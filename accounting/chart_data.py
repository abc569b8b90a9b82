"""Data for the chargeback page's charts, passed to the page as JSON (``json_script``).

- cloud spend per month against the tenants' monthly cloud budget and against what the
  same GPU-hours cost on-prem at the class's TCO rate, with the 60% and 70% lines: cloud
  spend above that band of the on-prem TCO is the usual sign that owning the GPUs is cheaper;
- this month's cloud spend so far (sampled on the beat schedule) against the budget;
- on-prem vs cloud GPU-hours per month.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from django.db.models import Avg

from accounting import selectors
from accounting.chargeback import ChargebackReport
from accounting.models import GpuRate
from accounting.periods import month_bounds
from broker.models import Cluster, Location
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
    tco = _onprem_tco_of_cloud_hours(report)
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


def _onprem_tco_of_cloud_hours(report: ChargebackReport) -> dict[date, Decimal]:
    rates = _OnpremRates()
    out = {m: Decimal("0") for m in report.months}
    for row in report.rows:
        if row.cloud_seconds:
            out[row.month] += row.cloud_hours * rates.price(row.gpu_class, row.month)
    return {m: v.quantize(Decimal("0.01")) for m, v in out.items()}


class _OnpremRates:
    """On-prem price per GPU-hour of a class in a month: the class-wide rate in force, else
    the mean of its cluster-specific rates, else the mean list price of on-prem clusters."""

    def __init__(self) -> None:
        self.rates = list(
            GpuRate.objects.order_by("-valid_from").values_list(
                "gpu_class__slug", "cluster_id", "valid_from", "price_per_gpu_hour"
            )
        )
        mean = Cluster.objects.filter(location=Location.ONPREM).aggregate(p=Avg("price_per_gpu_hour"))["p"]
        self.fallback = Decimal(mean or 0)

    def price(self, gpu_class: str, month: date) -> Decimal:
        in_force = [
            (cluster, price)
            for slug, cluster, valid_from, price in self.rates
            if slug == gpu_class and valid_from <= month
        ]
        class_wide = [price for cluster, price in in_force if cluster is None]
        if class_wide:
            return class_wide[0]
        latest: dict[int, Decimal] = {}
        for cluster, price in in_force:
            latest.setdefault(cluster, price)
        return sum(latest.values(), Decimal("0")) / len(latest) if latest else self.fallback
