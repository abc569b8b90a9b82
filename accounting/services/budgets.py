"""Where each GPU-hour budget of the policy stands, what a submission may ask of it, and
who is told at its thresholds.

Used is the ledger's (``accounting.chargeback``: every backend's ended usage and the cloud
bills, by the month it ended, the chargeback's own figures to the cent).  Held is what live
work may still use: each queued or running workload of the budget's tenant (project) and
class holds workers x GPUs x its time limit until it ends; then the hold returns and its
real use reaches the ledger at the next collection (until then it is counted nowhere: a
few minutes' gap, the collection interval).
"""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

from django.db import IntegrityError, transaction

from accounting.chargeback import OnpremRates, build_report
from accounting.models import BudgetAlert
from accounting.periods import months_range
from accounting.services.cloud_tco import finance_and_admin_emails
from broker import runtime
from broker.lifecycle import TERMINAL_STATES
from broker.models import Quota, Workload
from broker.placement.budgets import Budget, Standing, elapsed_share, period_bounds
from broker.services.fleet.policy import current_policy
from broker.services.records import tasks_bridge
from broker.services.records.audit import audit
from portal.tenancy.access import AnyUser, tenants_for
from portal.tenancy.models import Project, Tenant

_CENT = Decimal("0.01")


def hours_asked(*, gpus: int, time_limit_minutes: int) -> Decimal:
    """What a workload holds against a budget while it is live: its GPUs for its time limit."""
    return (Decimal(gpus * time_limit_minutes) / 60).quantize(_CENT)


def budget_standing(budget: Budget, *, at: datetime, asked_hours: Decimal = Decimal("0")) -> Standing:
    start, end = period_bounds(budget.period, at)
    tenant = Tenant.objects.filter(slug=budget.tenant).first()
    project = Project.objects.filter(tenant=tenant, slug=budget.project).first() if budget.project else None
    used = cost = held = Decimal("0")
    if tenant is not None and (project is not None or not budget.project):
        used, cost = _used(
            budget, tenant=tenant, project=project, first=start, months=3 if budget.period == "quarter" else 1
        )
        held = _held(budget, tenant=tenant, project=project)
    return Standing(
        budget=budget,
        start=start,
        end=end,
        used_hours=used,
        held_hours=held,
        elapsed=elapsed_share(start, end, at),
        asked_hours=asked_hours,
        used_cost=cost,
        rate=OnpremRates().price(budget.gpu_class, start),
    )


def _used(
    budget: Budget, *, tenant: Tenant, project: Project | None, first: date, months: int
) -> tuple[Decimal, Decimal]:
    report = build_report(
        months=months_range(first, months), tenant_ids={tenant.id}, project_id=project.id if project else None
    )
    rows = [r for r in report.rows if r.gpu_class == budget.gpu_class]
    return sum((r.gpu_hours for r in rows), Decimal("0")), sum((r.cost for r in rows), Decimal("0"))


def _held(budget: Budget, *, tenant: Tenant, project: Project | None) -> Decimal:
    live = Workload.objects.filter(tenant=tenant, gpu_class__slug=budget.gpu_class).exclude(state__in=TERMINAL_STATES)
    if project is not None:
        live = live.filter(project=project)
    return sum(
        (
            hours_asked(gpus=gpus, time_limit_minutes=int((spec or {}).get("time_limit_minutes", 60)))
            for gpus, spec in live.values_list("total_gpus", "spec")
        ),
        Decimal("0"),
    )


def standings_for_submission(
    *, tenant: Tenant, project: Project, gpu_class: str, asked_hours: Decimal, at: datetime | None = None
) -> list[Standing]:
    """Every budget the new work counts against, with its ask added."""
    budgets = current_policy().policy.budgets_for(tenant=tenant.slug, project=project.slug, gpu_class=gpu_class)
    if not budgets:
        # nothing to read: not even the clock (the production-loop replay counts the
        # broker's clock reads; a read here moved a decision of its 80-job slice)
        return []
    at = at or runtime.now()
    return [budget_standing(b, at=at, asked_hours=asked_hours) for b in budgets]


def budget_standings(*, user: AnyUser, tenant_slug: str = "", at: datetime | None = None) -> list[Standing]:
    """The budgets of the tenants the user belongs to (operators: every tenant), now; of
    one of them when ``tenant_slug`` names it."""
    at = at or runtime.now()
    mine = set(tenants_for(user).values_list("slug", flat=True))
    if tenant_slug:
        mine &= {tenant_slug}
    return [budget_standing(b, at=at) for b in current_policy().policy.budgets if b.tenant in mine]


def budget_check(*, now: datetime | None = None) -> list[BudgetAlert]:
    """Tell each budget's people once per period when it passes its warning share and once
    when use and holdings pass it; return the alerts this check wrote."""
    now = now or runtime.now()
    written = []
    for budget in current_policy().policy.budgets:
        standing = budget_standing(budget, at=now)
        tenant = Tenant.objects.filter(slug=budget.tenant).first()
        if tenant is None:
            continue
        for level, crossed in ((BudgetAlert.Level.WARN, standing.warns), (BudgetAlert.Level.OVER, standing.over)):
            if crossed and (alert := _record(tenant=tenant, standing=standing, level=level, now=now)):
                _tell(alert, standing)
                written.append(alert)
    return written


def _record(*, tenant: Tenant, standing: Standing, level: str, now: datetime) -> BudgetAlert | None:
    try:
        with transaction.atomic():  # the unique row: two checks at once tell once
            return BudgetAlert.objects.create(
                tenant=tenant,
                budget=standing.budget.name,
                period_start=standing.start,
                level=level,
                message=standing.words(),
                told_at=now,
            )
    except IntegrityError:
        return None


def _tell(alert: BudgetAlert, standing: Standing) -> None:
    members = finance_and_admin_emails(tenant_id=alert.tenant_id)
    owners = Quota.objects.filter(
        tenant_id=alert.tenant_id, gpu_class__slug=standing.budget.gpu_class, owner__is_active=True
    ).values_list("owner__email", flat=True)
    told = sorted({a for a in [*members, *owners] if a})
    audit(
        action=f"budget.{alert.level}",
        tenant_id=alert.tenant_id,
        message=alert.message,
        inputs={"budget": alert.budget, "period_start": f"{alert.period_start}", "mailed": told},
    )
    subject = f"GPU-hour budget {alert.budget}: {alert.get_level_display()}"
    forecast = f"At this period's pace so far it ends at {standing.forecast_hours:,.2f} GPU-hours."
    for address in told:
        tasks_bridge.enqueue_mail(subject=subject, body=f"{alert.message}.\n{forecast}\n", to=address)
