"""Writes of tenancy data: keyword-only, atomic, idempotent where a seed needs it."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.contrib.auth import get_user_model
from django.db import transaction

from portal.tenancy.models import Membership, Project, Role, Tenant


@transaction.atomic
def tenant_ensure(*, slug: str, name: str) -> Tenant:
    tenant, _ = Tenant.objects.get_or_create(slug=slug, defaults={"name": name})
    return tenant


@transaction.atomic
def project_ensure(
    *,
    tenant: Tenant,
    slug: str,
    name: str,
    slurm_account: str = "",
    k8s_namespace: str = "",
    cost_centre: str = "",
    k8s_queue: str = "",
) -> Project:
    project, _ = Project.objects.get_or_create(
        tenant=tenant,
        slug=slug,
        defaults={
            "name": name,
            "slurm_account": slurm_account,
            "k8s_namespace": k8s_namespace,
            "cost_centre": cost_centre,
            "k8s_queue": k8s_queue,
        },
    )
    return project


@transaction.atomic
def member_ensure(*, user: User, tenant: Tenant, role: str, project: Project | None = None) -> Membership:
    if role not in Role.values:
        raise ValueError(f"role: unknown role {role!r}")
    membership, _ = Membership.objects.get_or_create(user=user, tenant=tenant, project=project, role=role)
    return membership


@transaction.atomic
def user_ensure(*, username: str, password: str, email: str = "", is_staff: bool = False):
    """Create the user or reset its password (the demo prints them on every run)."""
    User = get_user_model()
    user, _ = User.objects.get_or_create(username=username, defaults={"email": email})
    user.set_password(password)
    user.is_staff = is_staff
    user.is_superuser = is_staff
    user.save()
    return user
