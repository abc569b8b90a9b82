"""Who answers for a quota, and the e-mail they get when its use passes their threshold.

The alert is sent once per crossing: ``alert_active`` is set, by a conditional update,
when use first reaches the share, and cleared when use falls back under it, so a quota
hovering at the line does not flood its owner.
"""

from __future__ import annotations

import logging

from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.contrib.auth import get_user_model
from django.db import transaction

from broker.models import Quota
from broker.services.records import tasks_bridge
from broker.services.records.audit import audit
from portal.tenancy.errors import DomainError
from portal.tenancy.models import Membership

log = logging.getLogger(__name__)


class OwnerRefused(DomainError, ValueError):
    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(message)


def owner_candidates(*, quota: Quota) -> QuerySet[User]:
    """Members of the quota's tenant and platform operators."""
    members = Membership.objects.filter(tenant_id=quota.tenant_id).values("user_id")
    return (
        get_user_model().objects.filter(is_active=True).filter(id__in=members)
        | get_user_model().objects.filter(is_active=True, is_staff=True)
    ).distinct()


@transaction.atomic
def quota_set_owner(*, actor: User, quota_id: int, owner_id: int | None, alert_share: float) -> Quota:
    quota = Quota.objects.select_for_update(of=("self",)).select_related("owner", "gpu_class").get(id=quota_id)
    owner = None
    if owner_id is not None:
        owner = owner_candidates(quota=quota).filter(id=owner_id).first()
        if owner is None:
            raise OwnerRefused("owner", "the owner must be a member of the tenant or a platform operator")
    if not 0.01 <= alert_share <= 1.0:
        raise OwnerRefused("alert_share", "must be between 1% and 100%")
    before = (getattr(quota.owner, "username", ""), quota.alert_share)
    quota.owner, quota.alert_share = owner, alert_share
    quota.save(update_fields=["owner", "alert_share", "updated_at"])
    audit(
        action="quota.owner_changed",
        tenant_id=quota.tenant_id,
        actor=actor,
        message=f"{quota.gpu_class.slug}: owner {before[0] or '-'} -> {getattr(owner, 'username', '') or '-'}, "
        f"alert at {before[1]:.0%} -> {alert_share:.0%}",
        inputs={"owner": getattr(owner, "username", ""), "alert_share": alert_share},
    )
    return quota


def quota_alert_check(*, quota: Quota, used: int) -> None:
    """Call inside the transaction that changed the use, with the quota row locked."""
    limit = quota.limit_gpus
    over = limit > 0 and used >= quota.alert_share * limit
    if over and not quota.alert_active:
        if Quota.objects.filter(id=quota.id, alert_active=False).update(alert_active=True):
            quota.alert_active = True
            _notify(quota, used)
    elif not over and quota.alert_active:
        Quota.objects.filter(id=quota.id).update(alert_active=False)
        quota.alert_active = False


def _notify(quota: Quota, used: int) -> None:
    owner = quota.owner
    subject = (
        f"GPU quota {quota.tenant.slug}/{quota.gpu_class.slug}: {used} of {quota.limit_gpus} GPUs in use "
        f"(over {quota.alert_share:.0%})"
    )
    audit(
        action="quota.alert",
        tenant_id=quota.tenant_id,
        message=subject,
        inputs={
            "used": used,
            "limit": quota.limit_gpus,
            "owner": getattr(owner, "username", ""),
            "mailed": bool(owner and owner.email),
        },
    )
    if owner is None or not owner.email:
        return
    body = (
        f"{subject}.\n\nReserved and running GPUs of tenant {quota.tenant.name} in class "
        f"{quota.gpu_class.slug} have passed {quota.alert_share:.0%} of the limit you own. "
        f"Borrowing allows {quota.borrow_limit_gpus} more.\n"
    )
    tasks_bridge.enqueue_mail(subject=subject, body=body, to=owner.email)
