"""Reads the API needs beyond the broker's own selectors, scoped the same way."""

from __future__ import annotations

from django.db.models import QuerySet

from broker.models import DispatchAttempt
from broker.selectors.workloads import workload_get
from portal.tenancy.access import AnyUser, is_operator, roles_of, tenants_for


def workload_attempts(*, user: AnyUser, workload_id: int) -> QuerySet[DispatchAttempt]:
    workload = workload_get(user=user, workload_id=workload_id)  # 404 for an outsider
    return DispatchAttempt.objects.filter(workload=workload).select_related("cluster")


def me(*, user: AnyUser) -> dict:
    return {
        "username": user.get_username(),
        "roles": sorted(roles_of(user)),
        "tenants": sorted(tenants_for(user).values_list("slug", flat=True)),
        "is_operator": is_operator(user),
    }
