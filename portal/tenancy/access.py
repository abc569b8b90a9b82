"""Who may see what: the one place tenant scoping and refusals are decided.

Every selector in the project narrows its queryset with these helpers, so an
outsider's query is simply empty.  Views and API views ask ``require_role`` (no object
yet) or ``object_for`` (one object), which decide 403 before 404 in one way for every
page and endpoint: no role for this kind of object anywhere -> 403 whatever the id; the
object visible -> the object; a member of the object's tenant without the role -> 403;
anyone else -> 404, so an outsider never learns that the id exists.
"""

from __future__ import annotations

from typing import TypeVar, cast

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.db.models import Model, Q, QuerySet
from django.http import Http404

from portal.tenancy.models import Membership, Project, Role, Tenant

AnyUser = AbstractBaseUser | AnonymousUser
M = TypeVar("M", bound=Model)


def signed_in(user: AnyUser | User) -> User:
    """The acting user as the one user model, for a service that records who acted.  Every
    page and endpoint that acts sits behind a login, so an anonymous user here is refused."""
    if isinstance(user, User):
        return user
    raise PermissionDenied("sign in first")


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


def require_role(user: AnyUser, *roles: str) -> None:
    """403 unless the user holds one of ``roles`` in some tenant (operators count as admins)."""
    if not roles_of(user) & set(roles):
        raise PermissionDenied(f"needs the {' or '.join(roles)} role")


def require_operator(user: AnyUser, *, hidden: bool = False) -> None:
    """Platform operators only: 403, or 404 where the page's existence is itself the fleet's."""
    if not is_operator(user):
        if hidden:
            raise Http404("Not found.")
        raise PermissionDenied("only platform operators may do this")


def object_for(user: AnyUser, visible: QuerySet[M], pk: int, *, tenant_field: str, roles: tuple[str, ...] = ()) -> M:
    """The object ``pk`` of ``visible`` (the selector's scoped queryset), or the refusal.

    ``roles``: who may reach this kind of object at all (checked first, before any row is
    read); ``tenant_field``: the lookup from the object to its tenant's id, which tells a
    member of that tenant (403: they know it exists) from an outsider (404)."""
    if roles:
        require_role(user, *roles)
    found = visible.filter(pk=pk).first()
    if found is not None:
        return found
    tenant_id = visible.model._default_manager.filter(pk=pk).values_list(tenant_field, flat=True).first()
    if tenant_id is not None and memberships(user).filter(tenant_id=tenant_id).exists():
        raise PermissionDenied("your role in this tenant does not allow this")
    raise Http404("Not found.")
