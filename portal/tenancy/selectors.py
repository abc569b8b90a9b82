"""Reads of tenancy data, always scoped to the acting user."""

from __future__ import annotations

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from portal.tenancy.access import AnyUser, projects_for, tenants_for
from portal.tenancy.models import Project, Tenant


def project_list(*, user: AnyUser, roles: tuple[str, ...] = ()) -> QuerySet[Project]:
    return projects_for(user, *roles).select_related("tenant")


def project_get(*, user: AnyUser, project_id: int, roles: tuple[str, ...] = ()) -> Project:
    return get_object_or_404(project_list(user=user, roles=roles), id=project_id)


def tenant_list(*, user: AnyUser, roles: tuple[str, ...] = ()) -> QuerySet[Tenant]:
    return tenants_for(user, *roles)
