"""Chargeback arithmetic: month x tenant x project x person x GPU class, on-prem and cloud.

The person is who the broker charges a job to: the workload's submitter, else the person
whose cluster identity the job ran as (a job outside the broker), else the cluster user
name as the scheduler recorded it, else "(unassigned)".

On-prem GPU-hours are priced at the GPU class's rate for that month (a cluster's own
rate wins over the class-wide one, the cluster's list price is the last resort);
cloud GPU-hours come from the schedulers' records and their cost from matched bill
lines.  Cloud hours whose workload has no bill line yet are not free: they carry an
estimate from the cloud cluster's price per GPU-hour, kept in a column of its own and
marked estimated, until the bill arrives.  Egress (data transfer
out) lines of a bill are a column of their own too, not GPU cost.  Hours and costs are
rounded per row and totals are sums of the rounded rows, so the page and every export
add up to the same figures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from decimal import ROUND_HALF_UP, Decimal

from django.contrib.auth import get_user_model
from django.db.models import Avg, Exists, F, OuterRef, Q, QuerySet, Sum
from django.db.models.functions import TruncMonth

from accounting.models import BillLine, CloudTcoReading, GpuRate, UsageEntry
from accounting.periods import month_bounds, month_start
from broker.models import Cluster, GpuClass, Location
from portal.tenancy.models import Project, Tenant

CENT = Decimal("0.01")
# Bill lines for data leaving the cloud, as the three providers name them (AWS usage type
# "EUW1-DataTransfer-Out-Bytes", GCP "Network Internet Egress from ...", Azure "Bandwidth /
# Standard Data Transfer Out").
EGRESS_PATTERN = r"(egress|data ?transfer[- ]?out|bandwidth)"
_SECONDS_PER_HOUR = Decimal(3600)
UNASSIGNED = "(unassigned)"


def hours(seconds: int) -> Decimal:
    return (Decimal(seconds) / _SECONDS_PER_HOUR).quantize(CENT, ROUND_HALF_UP)


@dataclass
class ChargebackRow:
    month: date
    tenant: str
    tenant_name: str
    project: str
    project_name: str
    gpu_class: str
    user: str = UNASSIGNED
    onprem_seconds: int = 0
    cloud_seconds: int = 0
    cloud_estimated_seconds: int = 0  # cloud hours with no bill line yet (part of cloud_seconds)
    onprem_exact_cost: Decimal = Decimal("0")
    cloud_exact_cost: Decimal = Decimal("0")
    cloud_estimated_exact: Decimal = Decimal("0")
    egress_exact_cost: Decimal = Decimal("0")

    @property
    def onprem_hours(self) -> Decimal:
        return hours(self.onprem_seconds)

    @property
    def cloud_hours(self) -> Decimal:
        return hours(self.cloud_seconds)

    @property
    def gpu_hours(self) -> Decimal:
        return self.onprem_hours + self.cloud_hours

    @property
    def onprem_cost(self) -> Decimal:
        return self.onprem_exact_cost.quantize(CENT, ROUND_HALF_UP)

    @property
    def cloud_cost(self) -> Decimal:
        """Billed cloud GPU cost: matched bill lines, egress apart."""
        return self.cloud_exact_cost.quantize(CENT, ROUND_HALF_UP)

    @property
    def cloud_estimated_hours(self) -> Decimal:
        return hours(self.cloud_estimated_seconds)

    @property
    def cloud_estimated_cost(self) -> Decimal:
        return self.cloud_estimated_exact.quantize(CENT, ROUND_HALF_UP)

    @property
    def egress_cost(self) -> Decimal:
        return self.egress_exact_cost.quantize(CENT, ROUND_HALF_UP)

    @property
    def estimated(self) -> bool:
        """Part of this row's cost is an estimate: some cloud hours wait for their bill."""
        return self.cloud_estimated_seconds > 0

    @property
    def cost(self) -> Decimal:
        return self.onprem_cost + self.cloud_cost + self.cloud_estimated_cost + self.egress_cost


@dataclass
class Totals:
    onprem_hours: Decimal = Decimal("0")
    cloud_hours: Decimal = Decimal("0")
    onprem_cost: Decimal = Decimal("0")
    cloud_cost: Decimal = Decimal("0")
    cloud_estimated_hours: Decimal = Decimal("0")
    cloud_estimated_cost: Decimal = Decimal("0")
    egress_cost: Decimal = Decimal("0")

    @property
    def gpu_hours(self) -> Decimal:
        return self.onprem_hours + self.cloud_hours

    @property
    def cloud_spend(self) -> Decimal:
        """Everything the cloud costs: billed, estimated until billed, and egress."""
        return self.cloud_cost + self.cloud_estimated_cost + self.egress_cost

    @property
    def cost(self) -> Decimal:
        return self.onprem_cost + self.cloud_spend

    @property
    def estimated(self) -> bool:
        return self.cloud_estimated_hours > 0 or self.cloud_estimated_cost > 0

    def add(self, row: ChargebackRow) -> None:
        self.onprem_hours += row.onprem_hours
        self.cloud_hours += row.cloud_hours
        self.onprem_cost += row.onprem_cost
        self.cloud_cost += row.cloud_cost
        self.cloud_estimated_hours += row.cloud_estimated_hours
        self.cloud_estimated_cost += row.cloud_estimated_cost
        self.egress_cost += row.egress_cost


@dataclass
class ChargebackReport:
    months: list[date]
    rows: list[ChargebackRow]
    totals: Totals = field(default_factory=Totals)
    by_month: dict[date, Totals] = field(default_factory=dict)


class RateBook:
    """Every on-prem rate, read once; ``price`` answers for a cluster, class and month."""

    def __init__(self) -> None:
        self.rates = list(
            GpuRate.objects.order_by("-valid_from").values(
                "gpu_class_id", "cluster_id", "valid_from", "price_per_gpu_hour"
            )
        )
        self.list_price = dict(Cluster.objects.values_list("id", "price_per_gpu_hour"))

    def price(self, cluster_id: int, gpu_class_id: int | None, month: date) -> Decimal:
        for wanted_cluster in (cluster_id, None):  # the cluster's own rate wins
            rate = self._rate(wanted_cluster, gpu_class_id, month)
            if rate is not None:
                return rate
        return self.list_price.get(cluster_id, Decimal("0"))

    def cloud_estimate(self, cluster_id: int) -> Decimal:
        """What an unbilled cloud GPU-hour is expected to cost: the cloud cluster's price per
        GPU-hour (what placement ranks it by; the class rates are on-prem TCO, and a cloud
        cluster has no rate of its own: its bill is its rate)."""
        return self.list_price.get(cluster_id, Decimal("0"))

    def _rate(self, cluster_id: int | None, gpu_class_id: int | None, month: date) -> Decimal | None:
        for r in self.rates:
            if r["cluster_id"] == cluster_id and r["gpu_class_id"] == gpu_class_id and r["valid_from"] <= month:
                return r["price_per_gpu_hour"]
        return None


def build_report(*, months: list[date], tenant_ids: set[int] | None, project_id: int | None = None) -> ChargebackReport:
    """``tenant_ids`` None: every tenant, unassigned usage included (operators)."""
    start, stop = month_bounds(months[0])[0], month_bounds(months[-1])[1]
    rows: dict[tuple, ChargebackRow] = {}
    names = _Names()
    usage = _scoped(UsageEntry.objects.filter(end__gte=start, end__lt=stop, waived=False), tenant_ids, project_id)
    _add_usage(rows, names, usage)
    billed = _scoped(BillLine.objects.filter(usage_start__gte=start, usage_start__lt=stop), tenant_ids, project_id)
    _add_bills(rows, names, billed)
    return _finish(months, rows)


def _add_usage(rows: dict, names: "_Names", usage: QuerySet) -> None:
    rates = RateBook()
    billed = BillLine.objects.filter(workload_id=OuterRef("workload_id"))
    groups = (
        usage.annotate(month=TruncMonth("end"), billed=Exists(billed))
        .values(
            "month",
            "tenant_id",
            "project_id",
            "gpu_class_id",
            "cluster_id",
            "cluster__location",
            "billed",
            "user_id",
            "cluster_user",
        )
        .annotate(secs=Sum("gpu_seconds"))
        .order_by()
    )
    for g in groups:
        row = _row(rows, names, g)
        if g["cluster__location"] == Location.CLOUD:
            row.cloud_seconds += g["secs"]  # its cost comes from the bill ...
            if not g["billed"]:  # ... or, until the bill has a line for it, from the rates
                price = rates.cloud_estimate(g["cluster_id"])
                row.cloud_estimated_seconds += g["secs"]
                row.cloud_estimated_exact += price * g["secs"] / _SECONDS_PER_HOUR
            continue
        price = rates.price(g["cluster_id"], g["gpu_class_id"], month_start(g["month"]))
        row.onprem_seconds += g["secs"]
        row.onprem_exact_cost += price * g["secs"] / _SECONDS_PER_HOUR


def _add_bills(rows: dict, names: "_Names", billed: QuerySet) -> None:
    egress = Q(description__iregex=EGRESS_PATTERN)
    for lines, is_egress in ((billed.exclude(egress), False), (billed.filter(egress), True)):
        groups = (
            lines.annotate(month=TruncMonth("usage_start"), user_id=F("workload__submitted_by_id"))
            .values("month", "tenant_id", "project_id", "gpu_class_id", "user_id")
            .annotate(cost=Sum("cost"))
            .order_by()
        )
        for g in groups:
            row = _row(rows, names, g)
            if is_egress:
                row.egress_exact_cost += g["cost"] or Decimal("0")
            else:
                row.cloud_exact_cost += g["cost"] or Decimal("0")


def _scoped(qs: QuerySet, tenant_ids: set[int] | None, project_id: int | None) -> QuerySet:
    if tenant_ids is not None:
        qs = qs.filter(Q(tenant_id__in=tenant_ids))
    if project_id is not None:
        qs = qs.filter(project_id=project_id)
    return qs


class _Names:
    def __init__(self) -> None:
        self.tenants = {t.id: t for t in Tenant.objects.all()}
        self.projects = {p.id: p for p in Project.objects.all()}
        self.classes = dict(GpuClass.objects.values_list("id", "slug"))
        self._users: dict[int, str] = {}

    def user(self, user_id: int | None, cluster_user: str = "") -> str:
        if user_id is None:
            return cluster_user or UNASSIGNED
        if user_id not in self._users:
            name = get_user_model().objects.filter(id=user_id).values_list("username", flat=True).first()
            self._users[user_id] = name or UNASSIGNED
        return self._users[user_id]


def _row(rows: dict, names: _Names, g: dict) -> ChargebackRow:
    month = month_start(g["month"])
    user = names.user(g["user_id"], g.get("cluster_user", ""))
    key = (month, g["tenant_id"], g["project_id"], user, g["gpu_class_id"])
    if key not in rows:
        tenant, project = names.tenants.get(g["tenant_id"]), names.projects.get(g["project_id"])
        rows[key] = ChargebackRow(
            month=month,
            tenant=tenant.slug if tenant else UNASSIGNED,
            tenant_name=tenant.name if tenant else "",
            project=project.slug if project else UNASSIGNED,
            project_name=project.name if project else "",
            gpu_class=names.classes.get(g["gpu_class_id"], "unclassified"),
            user=user,
        )
    return rows[key]


def _finish(months: list[date], rows: dict) -> ChargebackReport:
    ordered = sorted(rows.values(), key=lambda r: (r.month, r.tenant, r.project, r.user, r.gpu_class))
    report = ChargebackReport(months=months, rows=ordered, by_month={m: Totals() for m in months})
    for row in ordered:
        report.totals.add(row)
        report.by_month.setdefault(row.month, Totals()).add(row)
    return report


def onprem_tco_of_cloud_hours(report: ChargebackReport) -> dict[date, Decimal]:
    """Per month: what the report's cloud GPU-hours would have cost on-prem, at the on-prem
    TCO rate of their GPU class (the yardstick of the cloud-burst rule of thumb)."""
    rates = OnpremRates()
    out = {m: Decimal("0") for m in report.months}
    for row in report.rows:
        if row.cloud_seconds:
            out[row.month] += row.cloud_hours * rates.price(row.gpu_class, row.month)
    return {m: v.quantize(Decimal("0.01")) for m, v in out.items()}


class OnpremRates:
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


@dataclass(frozen=True)
class CloudTcoShare:
    """A tenant's cloud spend in a month (billed, estimated until billed, egress) beside what
    the same GPU-hours cost on-prem at the TCO rates of their classes."""

    tenant: str
    month: date
    cloud_spend: Decimal
    onprem_tco: Decimal

    @property
    def share(self) -> float | None:
        return float(self.cloud_spend / self.onprem_tco) if self.onprem_tco > 0 else None


def cloud_tco_shares(report: ChargebackReport) -> list[CloudTcoShare]:
    """Per month and tenant with cloud GPU-hours, in the report's order."""
    rates = OnpremRates()
    sums: dict[tuple[date, str], tuple[Decimal, Decimal]] = {}
    for row in report.rows:
        spend = row.cloud_cost + row.cloud_estimated_cost + row.egress_cost
        if not row.cloud_seconds and not spend:
            continue
        key = (row.month, row.tenant)
        before = sums.get(key, (Decimal("0"), Decimal("0")))
        sums[key] = (before[0] + spend, before[1] + row.cloud_hours * rates.price(row.gpu_class, row.month))
    return [
        CloudTcoShare(tenant=tenant, month=month, cloud_spend=spend, onprem_tco=tco.quantize(CENT, ROUND_HALF_UP))
        for (month, tenant), (spend, tco) in sorted(sums.items())
    ]


def crossing_words(reading: CloudTcoReading, action: str = "") -> str:
    """What finance, the tenant's admins and a held-back job are told of a crossing; under
    ``action``, else the one the last check recorded."""
    then = (
        "new cloud placements for the tenant stop until the month ends"
        if (action or reading.action) == "stop"
        else "bursting goes on (the policy only warns)"
    )
    return (
        f"Cloud spend of {reading.tenant.name} in {reading.month:%Y-%m} is {reading.cloud_spend:,.2f}, "
        f"{reading.share or 0:.0%} of what the same GPU-hours cost on-prem at TCO rates "
        f"({reading.onprem_tco:,.2f}): past the policy's {reading.share_limit:.0%}; {then}"
    )
