"""Who may see what: the one place tenant scoping is decided.

Every selector in the project narrows its queryset with these helpers, so an
outsider's query is simply empty and the view answers 404.
"""

from __future__ import annotations

from typing import cast

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, User
from django.db.models import Q, QuerySet

from portal.tenancy.models import Membership, Project, Role, Tenant

AnyUser = AbstractBaseUser | AnonymousUser


def is_operator(user: AnyUser) -> bool:
    """Platform operators (staff) run the fleet: clusters, all escalations."""
    return bool(user.is_authenticated and user.is_active and cast(User, user).is_staff)


def memberships(user: AnyUser, *roles: str) -> QuerySet[Membership]:
    if not user.is_authenticated or not user.is_active:
        return Membership.objects.none()
    qs = Membership.objects.filter(user=cast(User, user))  # authenticated: the one user model
    return qs.filter(role__in=roles) if roles else qs


def tenants_for(user: AnyUser, *roles: str) -> QuerySet[Tenant]:
    if is_operator(user) and not roles:
        return Tenant.objects.all()
    return Tenant.objects.filter(id__in=memberships(user, *roles).values("tenant_id"))


def projects_for(user: AnyUser, *roles: str) -> QuerySet[Project]:
    """Projects the user may act on in one of ``roles`` (any role when none given)."""
    if is_operator(user) and not roles:
        return Project.objects.all()
    ms = memberships(user, *roles)
    whole = ms.filter(project__isnull=True).values("tenant_id")
    single = ms.filter(project__isnull=False).values("project_id")
    return Project.objects.filter(Q(tenant_id__in=whole) | Q(id__in=single))


def roles_of(user: AnyUser) -> set[str]:
    roles = set(memberships(user).values_list("role", flat=True))
    if is_operator(user):
        roles.add(Role.ADMIN)
    return roles


def can_admin_tenant(user: AnyUser, tenant_id: int) -> bool:
    return is_operator(user) or memberships(user, Role.ADMIN).filter(tenant_id=tenant_id).exists()
