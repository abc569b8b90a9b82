"""The cloud-burst rule as a warning: a tenant's cloud spend against on-prem TCO, each month.

The rule of thumb (``broker.placement.burst``): once cloud spend reaches 60-70% of what the
same GPU-hours cost on-prem at TCO rates, owning GPUs is cheaper.  Each check reads the
month so far from the ledger (usage, bills and egress: the chargeback's figures) and keeps
one reading per tenant and month.  The first time a tenant's spend passes the policy's
share (``burst.reassess_share``) the reading records when, finance and the tenant's admins
are told by e-mail, and the audit trail says so; the policy's ``burst.over_tco`` then says
whether bursting only warns or stops for that tenant until the month ends
(``broker.services.placing.bursting``).
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from accounting.chargeback import CloudTcoShare, build_report, cloud_tco_shares, crossing_words
from accounting.models import CloudTcoReading
from accounting.periods import month_start
from broker import runtime
from broker.services.fleet.policy import current_policy
from broker.services.records import tasks_bridge
from broker.services.records.audit import audit
from portal.tenancy.models import Membership, Role, Tenant


def cloud_tco_check(*, now: datetime | None = None) -> list[CloudTcoReading]:
    """Read this month's cloud spend against on-prem TCO per tenant; return the readings
    that crossed the policy's share in this check (each is told once a month)."""
    now = now or runtime.now()
    month = month_start(now)
    rule = current_policy().policy.burst
    tenants = {t.slug: t for t in Tenant.objects.all()}
    crossed = []
    for share in cloud_tco_shares(build_report(months=[month], tenant_ids=None)):
        tenant = tenants.get(share.tenant)
        if tenant is None:
            continue  # usage nobody could be charged for: no tenant to tell
        reading, newly = _record(tenant=tenant, share=share, limit=rule.reassess_share, action=rule.over_tco, now=now)
        if newly:
            _tell(reading)
            crossed.append(reading)
    return crossed


@transaction.atomic
def _record(
    *, tenant: Tenant, share: CloudTcoShare, limit: float, action: str, now: datetime
) -> tuple[CloudTcoReading, bool]:
    reading, _ = CloudTcoReading.objects.update_or_create(
        tenant=tenant,
        month=share.month,
        defaults={
            "cloud_spend": share.cloud_spend,
            "onprem_tco": share.onprem_tco,
            "share_limit": limit,
            "action": action,
            "checked_at": now,
        },
    )
    over = share.share is not None and share.share >= limit
    if not over or reading.crossed_at is not None:
        return reading, False
    # a conditional update: two checks at once tell the tenant once
    newly = bool(CloudTcoReading.objects.filter(id=reading.id, crossed_at__isnull=True).update(crossed_at=now))
    reading.crossed_at = now
    return reading, newly


def finance_and_admin_emails(*, tenant_id: int) -> list[str]:
    """Who is told of a tenant's money: its active finance and admin members with an address."""
    return list(
        Membership.objects.filter(tenant_id=tenant_id, role__in=(Role.FINANCE, Role.ADMIN), user__is_active=True)
        .exclude(user__email="")
        .values_list("user__email", flat=True)
        .distinct()
    )


def _tell(reading: CloudTcoReading) -> None:
    words = crossing_words(reading)
    told = finance_and_admin_emails(tenant_id=reading.tenant_id)
    audit(
        action="accounting.cloud_tco_crossed",
        tenant_id=reading.tenant_id,
        message=words,
        inputs={
            "month": f"{reading.month:%Y-%m}",
            "cloud_spend": str(reading.cloud_spend),
            "onprem_tco": str(reading.onprem_tco),
            "share_limit": reading.share_limit,
            "action": reading.action,
            "mailed": told,
        },
    )
    subject = f"Cloud spend of {reading.tenant.slug} passed {reading.share_limit:.0%} of on-prem TCO"
    for address in told:
        tasks_bridge.enqueue_mail(subject=subject, body=words + ".\n", to=address)
