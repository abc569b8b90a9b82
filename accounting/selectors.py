"""Reads of accounting data, always scoped to the acting user.

Finance sees its own tenants, operators see everything (unassigned usage included),
researchers see only their projects' GPU-hours.  An object outside the user's scope
is simply not in the queryset, so ``get_object_or_404`` answers 404.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal

from django.core.exceptions import PermissionDenied
from django.db.models import BooleanField, Count, ExpressionWrapper, F, Q, QuerySet, Sum
from django.shortcuts import get_object_or_404

from accounting.chargeback import ChargebackReport, build_report, crossing_words, hours
from accounting.models import (
    BillImport,
    BillLine,
    CloudTcoReading,
    Discrepancy,
    GpuRate,
    ReconciliationRun,
    UsageEntry,
)
from accounting.periods import month_bounds, months_range
from broker.models import Cluster, GpuClass, Location
from portal.tenancy.access import AnyUser, is_operator, projects_for, tenants_for
from portal.tenancy.models import Project, Role, Tenant


@dataclass(frozen=True)
class FinanceScope:
    """Which tenants' money the user may see; ``tenant_ids`` None means all (operator)."""

    tenant_ids: frozenset[int] | None

    def filter(self, qs: QuerySet, field_name: str = "tenant_id") -> QuerySet:
        return qs if self.tenant_ids is None else qs.filter(**{f"{field_name}__in": self.tenant_ids})


def finance_scope(*, user: AnyUser) -> FinanceScope:
    """Operators: everything; finance members: their tenants; anyone else: 403."""
    if is_operator(user):
        return FinanceScope(tenant_ids=None)
    ids = frozenset(tenants_for(user, Role.FINANCE).values_list("id", flat=True))
    if not ids:
        raise PermissionDenied("finance pages are for the finance role")
    return FinanceScope(tenant_ids=ids)


def finance_tenants(*, user: AnyUser) -> QuerySet[Tenant]:
    scope = finance_scope(user=user)
    return scope.filter(Tenant.objects.all(), "id")


# --- chargeback ---------------------------------------------------------------------------


def cloud_tco_warnings(
    *, user: AnyUser, months: list[date], tenant_slug: str = ""
) -> list[tuple[CloudTcoReading, str]]:
    """The months' crossings of the cloud-burst rule (cloud spend past the policy's share of
    the on-prem TCO of the same GPU-hours) for the tenants the user may see, in words."""
    rows = finance_scope(user=user).filter(
        CloudTcoReading.objects.filter(month__in=months, crossed_at__isnull=False).select_related("tenant")
    )
    if tenant_slug:
        rows = rows.filter(tenant__slug=tenant_slug)
    return [(r, crossing_words(r)) for r in rows.order_by("month", "tenant__slug")]


def chargeback_report(
    *, user: AnyUser, first: date, months: int, tenant_slug: str = "", project_slug: str = ""
) -> ChargebackReport:
    scope = finance_scope(user=user)
    tenant_ids = None if scope.tenant_ids is None else set(scope.tenant_ids)
    project_id = None
    if tenant_slug:
        tenant = get_object_or_404(finance_tenants(user=user), slug=tenant_slug)
        tenant_ids = {tenant.id}
        if project_slug:
            project_id = get_object_or_404(Project, tenant=tenant, slug=project_slug).id
    return build_report(months=months_range(first, months), tenant_ids=tenant_ids, project_id=project_id)


# --- a researcher's own GPU-hours ----------------------------------------------------------


@dataclass
class UsageLine:
    project: Project
    gpu_class: str
    ended_hours: Decimal
    running_hours: Decimal
    jobs: int


def usage_mine(*, user: AnyUser, month: date) -> list[UsageLine]:
    """GPU-hours of the user's projects in ``month``: jobs ended in it, and still-running jobs."""
    start, stop = month_bounds(month)
    projects = {p.id: p for p in projects_for(user).select_related("tenant")}
    classes = dict(GpuClass.objects.values_list("id", "slug"))
    in_month = Q(end__gte=start, end__lt=stop) | Q(end__isnull=True, start__lt=stop)
    groups = (
        UsageEntry.objects.filter(in_month, project_id__in=projects, waived=False)
        .values("project_id", "gpu_class_id", running=ExpressionWrapper(Q(end__isnull=True), BooleanField()))
        .annotate(secs=Sum("gpu_seconds"), n=Count("id"))
        .order_by()
    )
    lines: dict[tuple, UsageLine] = {}
    for g in groups:
        key = (g["project_id"], g["gpu_class_id"])
        if key not in lines:
            lines[key] = UsageLine(
                projects[g["project_id"]], classes.get(g["gpu_class_id"], "unclassified"), Decimal("0"), Decimal("0"), 0
            )
        line = lines[key]
        if g["running"]:
            line.running_hours += hours(g["secs"])
        else:
            line.ended_hours += hours(g["secs"])
        line.jobs += g["n"]
    return sorted(lines.values(), key=lambda u: (str(u.project), u.gpu_class))


# --- bills ---------------------------------------------------------------------------------


def bill_list(*, user: AnyUser) -> QuerySet[BillImport]:
    scope = finance_scope(user=user)
    return (
        scope.filter(BillImport.objects.all())
        .select_related("tenant", "cluster", "uploaded_by")
        .annotate(unmatched=F("line_count") - F("matched_count"))
    )


def bill_get(*, user: AnyUser, bill_id: int) -> BillImport:
    return get_object_or_404(bill_list(user=user), id=bill_id)


def bill_lines(*, bill: BillImport) -> QuerySet[BillLine]:
    return bill.lines.select_related("project", "project__tenant", "workload", "gpu_class")


def upload_clusters() -> QuerySet[Cluster]:
    """Bills belong to cloud clusters; cluster names are not tenant data."""
    return Cluster.objects.filter(location=Location.CLOUD)


# --- reconciliation ------------------------------------------------------------------------


@dataclass
class RunView:
    run: ReconciliationRun
    discrepancies: list[Discrepancy] = field(default_factory=list)


def reconciliation_view(*, user: AnyUser, period: date, cluster_name: str = "") -> list[RunView]:
    """Each cluster's run for ``period`` with the discrepancies the user may see."""
    scope = finance_scope(user=user)
    runs = ReconciliationRun.objects.filter(period=period).select_related("cluster", "ran_by")
    if cluster_name:
        runs = runs.filter(cluster__name=cluster_name)
    found = scope.filter(Discrepancy.objects.filter(run__in=runs)).select_related(
        "tenant", "project", "workload", "bill_line", "bill_line__bill", "usage_entry"
    )
    views = {run.id: RunView(run) for run in runs}
    for d in found:
        views[d.run_id].discrepancies.append(d)
    return list(views.values())


@dataclass
class ClusterMonth:
    """Where one cluster's month stands: is its bill in, has it been reconciled, what was found."""

    month: date
    cluster: Cluster
    bill: str  # "imported", "awaiting" (cloud, none yet), "" (on-prem)
    run: ReconciliationRun | None
    discrepancies: int  # those the user may see

    @property
    def status(self) -> str:
        if self.run is None:
            return "not reconciled"
        if self.discrepancies:
            return f"{self.discrepancies} discrepanc{'y' if self.discrepancies == 1 else 'ies'}"
        return "reconciled"


def reconciliation_status(*, user: AnyUser, months: list[date]) -> list[ClusterMonth]:
    """Per month and cluster: bill imported or awaited, reconciliation run or not, discrepancies.

    Cluster names and whether a bill exists are fleet facts; the discrepancy counts are the
    user's tenants' only (all for operators)."""
    scope = finance_scope(user=user)
    clusters = list(Cluster.objects.filter(enabled=True).order_by("name"))
    runs = {(r.cluster_id, r.period): r for r in ReconciliationRun.objects.filter(period__in=months)}
    counts = dict(
        scope.filter(Discrepancy.objects.filter(run__in=runs.values()))
        .values("run_id")
        .annotate(n=Count("id"))
        .values_list("run_id", "n")
        .order_by()
    )
    out = []
    for month in months:
        start, stop = month_bounds(month)
        billed = set(
            BillLine.objects.filter(usage_start__gte=start, usage_start__lt=stop, bill__cluster__isnull=False)
            .values_list("bill__cluster_id", flat=True)
            .distinct()
        )
        for cluster in clusters:
            run = runs.get((cluster.id, month))
            bill = "" if cluster.location != Location.CLOUD else ("imported" if cluster.id in billed else "awaiting")
            out.append(ClusterMonth(month, cluster, bill, run, counts.get(run.id, 0) if run else 0))
    return out


# --- rates ---------------------------------------------------------------------------------


def rate_list(*, user: AnyUser) -> QuerySet[GpuRate]:
    """Rates are fleet-wide: operators set them, finance may read them."""
    finance_scope(user=user)
    return GpuRate.objects.select_related("gpu_class", "cluster")


def can_set_rates(*, user: AnyUser) -> bool:
    return is_operator(user)
