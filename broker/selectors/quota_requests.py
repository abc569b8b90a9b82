"""Reads for quota requests, scoped to the acting user: the requester, the quota's owner,
the tenant's admins and platform operators see a request; anyone else gets 404."""

from __future__ import annotations

from django.db.models import Q, QuerySet
from django.shortcuts import get_object_or_404

from broker.models import AuditRecord, QuotaRequest
from portal.tenancy.access import AnyUser, can_admin_tenant, is_operator, tenants_for
from portal.tenancy.models import Role


def quota_request_list(*, user: AnyUser) -> QuerySet[QuotaRequest]:
    rows = QuotaRequest.objects.select_related(
        "quota__gpu_class", "quota__tenant", "quota__owner", "project", "requester", "decided_by"
    )
    if is_operator(user):
        return rows
    if not getattr(user, "is_authenticated", False):
        return rows.none()
    return rows.filter(Q(requester=user) | Q(quota__owner=user) | Q(quota__tenant__in=tenants_for(user, Role.ADMIN)))


def quota_request_get(*, user: AnyUser, request_id: int) -> QuotaRequest:
    return get_object_or_404(quota_request_list(user=user), id=request_id)


def quota_request_trail(*, request: QuotaRequest) -> QuerySet[AuditRecord]:
    """Every step of one request, oldest first (the caller has already been allowed to see it)."""
    return (
        AuditRecord.objects.filter(action__startswith="quota_request.", inputs__request_id=request.id)
        .select_related("actor")
        .order_by("created_at", "id")
    )


def can_decide(*, user: AnyUser, request: QuotaRequest) -> bool:
    """The quota's owner decides; a quota with no owner is decided by its tenant's admins or an
    operator.  Never the requester (checked separately, so the refusal can say why)."""
    owner_id = request.quota.owner_id
    if owner_id is not None:
        return owner_id == getattr(user, "pk", None)
    return is_operator(user) or can_admin_tenant(user, request.quota.tenant_id)
