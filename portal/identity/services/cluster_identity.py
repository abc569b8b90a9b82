"""Writes of people's cluster identities and of whose name a project's jobs carry.

Every change is audited (once per tenant the person belongs to, so each tenant's admins
see it in their own trail).  Bad input raises IdentityInvalid with a message per field."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction

from broker.services.records.audit import audit
from portal.identity.models import ClusterIdentity, IdentitySource
from portal.identity.names import k8s_user_problem, posix_name_problem
from portal.tenancy.errors import DomainError
from portal.tenancy.models import Membership, Project, RunAs


class IdentityInvalid(DomainError, ValueError):
    def __init__(self, fields: dict[str, list[str]]):
        super().__init__("; ".join(f"{k}: {' '.join(v)}" for k, v in fields.items()))
        self.fields = fields

    def field_messages(self) -> dict[str, list[str]]:
        return {str(k): [str(m) for m in v] for k, v in self.fields.items()}


def _problems(*, user: User, posix_user: str, posix_group: str, k8s_user: str) -> dict[str, list[str]]:
    problems: dict[str, list[str]] = {}
    if why := posix_name_problem(posix_user):
        problems["posix_user"] = [why]
    elif (
        other := ClusterIdentity.objects.filter(posix_user=posix_user).exclude(user=user).select_related("user").first()
    ):
        problems["posix_user"] = [f"{posix_user!r} is already the cluster identity of {other.user.username}."]
    if posix_group and (why := posix_name_problem(posix_group, what="group")):
        problems["posix_group"] = [why]
    if k8s_user and (why := k8s_user_problem(k8s_user)):
        problems["k8s_user"] = [why]
    return problems


def _audit_for_tenants(*, user: User, actor: User, action: str, message: str, inputs: dict) -> None:
    tenant_ids: list[int | None] = [
        *sorted(set(Membership.objects.filter(user=user).values_list("tenant_id", flat=True)))
    ] or [None]
    for tenant_id in tenant_ids:
        audit(action=action, actor=actor, tenant_id=tenant_id, message=message, inputs=inputs)


@transaction.atomic
def cluster_identity_set(
    *,
    actor: User,
    user: User,
    posix_user: str,
    posix_group: str = "",
    k8s_user: str = "",
    source: str = IdentitySource.ADMIN,
) -> ClusterIdentity:
    """Give ``user`` this cluster identity (created or replaced); unchanged input writes nothing."""
    posix_user, posix_group, k8s_user = posix_user.strip(), posix_group.strip(), k8s_user.strip()
    problems = _problems(user=user, posix_user=posix_user, posix_group=posix_group, k8s_user=k8s_user)
    if problems:
        raise IdentityInvalid(problems)
    current = ClusterIdentity.objects.select_for_update().filter(user=user).first()
    wanted = {"posix_user": posix_user, "posix_group": posix_group, "k8s_user": k8s_user}
    if current and all(getattr(current, k) == v for k, v in wanted.items()) and current.source == source:
        return current
    before = {k: getattr(current, k) for k in wanted} if current else {}
    identity, _ = ClusterIdentity.objects.update_or_create(
        user=user, defaults={**wanted, "source": source, "updated_by": actor if getattr(actor, "pk", None) else None}
    )
    _audit_for_tenants(
        user=user,
        actor=actor,
        action="identity.cluster_identity_set",
        message=f"{user.username} runs at the clusters as {posix_user}"
        + (f" (Kubernetes user {k8s_user})" if k8s_user else "")
        + f", from {source}",
        inputs={"before": before, "after": wanted, "source": source},
    )
    return identity


@transaction.atomic
def cluster_identity_clear(*, actor: User, user: User) -> bool:
    """Remove ``user``'s cluster identity; False when there was none."""
    current = ClusterIdentity.objects.select_for_update().filter(user=user).first()
    if current is None:
        return False
    before = {"posix_user": current.posix_user, "posix_group": current.posix_group, "k8s_user": current.k8s_user}
    current.delete()
    _audit_for_tenants(
        user=user,
        actor=actor,
        action="identity.cluster_identity_cleared",
        message=f"{user.username} has no cluster identity any more",
        inputs={"before": before},
    )
    return True


def cluster_identity_from_claims(*, user: User, claims: dict, claim: str) -> ClusterIdentity | None:
    """Sign-in: take the POSIX user name from ``claim`` when the provider sends one.  An
    identity an admin set by hand wins over the claim; a malformed claim changes nothing."""
    value = claims.get(claim) if claim else None
    if not isinstance(value, str) or not value:
        return None
    current = ClusterIdentity.objects.filter(user=user).first()
    if current is not None and current.source == IdentitySource.ADMIN:
        return current
    try:
        return cluster_identity_set(
            actor=user,
            user=user,
            posix_user=value,
            posix_group=current.posix_group if current else "",
            k8s_user=current.k8s_user if current else "",
            source=IdentitySource.CLAIM,
        )
    except IdentityInvalid as exc:
        audit(
            action="identity.cluster_identity_refused",
            actor=user,
            message=f"{user.username}: claim {claim} not used: {exc}",
        )
        return current


@transaction.atomic
def project_run_as_set(*, actor: User, project: Project, run_as: str) -> Project:
    if run_as not in RunAs.values:
        raise IdentityInvalid({"run_as": [f"must be one of {', '.join(RunAs.values)}."]})
    moved = Project.objects.filter(id=project.id).exclude(run_as=run_as).update(run_as=run_as)
    project.refresh_from_db()
    if moved:
        audit(
            action="identity.project_run_as_set",
            actor=actor,
            tenant_id=project.tenant_id,
            message=f"jobs of {project} run as the {run_as}",
            inputs={"run_as": run_as},
        )
    return project
