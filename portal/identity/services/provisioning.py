"""First sign-in creates the user; every sign-in brings their rule-granted roles in line
with the claims: roles whose group is gone are removed, new ones added, all audited.
Roles given by hand (no GrantedRole row) and local accounts are never touched."""

from __future__ import annotations

import re

from django.contrib.auth.models import User
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from broker.services.records.audit import audit
from portal.identity.models import ClaimRule, ExternalIdentity, GrantedRole
from portal.identity.services.cluster_identity import cluster_identity_from_claims
from portal.tenancy.models import Membership

_USERNAME_BAD = re.compile(r"[^\w.@+-]+")


class IdentityRefused(ValueError):
    pass


def _values(claims: dict, name: str) -> set[str]:
    raw = claims.get(name)
    if isinstance(raw, str):
        return {raw}
    if isinstance(raw, (list, tuple)):
        return {str(v) for v in raw}
    return set()


def matching_rules(claims: dict) -> list[ClaimRule]:
    rules = ClaimRule.objects.select_related("tenant", "project")
    return [r for r in rules if r.value in _values(claims, r.claim)]


@transaction.atomic
def identity_sign_in(*, issuer: str, claims: dict):
    subject = str(claims.get("sub") or "")
    if not subject:
        raise IdentityRefused("the provider sent no subject (sub)")
    identity = ExternalIdentity.objects.select_for_update().filter(issuer=issuer, subject=subject).first()
    if identity is None:
        identity = ExternalIdentity.objects.create(user=_new_user(claims), issuer=issuer, subject=subject)
        audit(action="auth.provisioned", actor=identity.user, message=f"{identity.user.username} from {issuer}")
    user = identity.user
    if not user.is_active:
        raise IdentityRefused(f"{user.username} is deactivated here")
    if claims.get("email") and user.email != claims["email"]:
        user.email = str(claims["email"])[:254]
        user.save(update_fields=["email"])
    identity.last_claims = {k: claims[k] for k in ("sub", "email", "preferred_username", "groups") if k in claims}
    identity.save(update_fields=["last_claims", "last_seen_at"])
    _sync_roles(user, matching_rules(claims))
    cluster_identity_from_claims(user=user, claims=claims, claim=settings.GPUBROKER_OIDC_POSIX_CLAIM)
    return user


def _new_user(claims: dict):
    base = _USERNAME_BAD.sub("-", str(claims.get("preferred_username") or claims.get("email") or claims["sub"]))[:140]
    users = get_user_model().objects
    name, n = base or "user", 1
    while users.filter(username=name).exists():  # a local account keeps its name
        n += 1
        name = f"{base}-{n}"
    user = users.create(username=name, email=str(claims.get("email", ""))[:254])
    user.set_unusable_password()  # signs in through the provider only
    user.save(update_fields=["password"])
    return user


def _sync_roles(user: User, rules: list[ClaimRule]) -> None:
    wanted = {(r.tenant_id, r.project_id, r.role): r for r in rules}
    granted = {
        (g.membership.tenant_id, g.membership.project_id, g.membership.role): g
        for g in GrantedRole.objects.filter(membership__user=user).select_related("membership")
    }
    for key, grant in granted.items():
        if key not in wanted:
            membership = grant.membership
            audit(
                action="auth.role_removed",
                actor=user,
                tenant_id=membership.tenant_id,
                message=f"{user.username}: {membership.role} removed (group no longer in the claims)",
            )
            membership.delete()
    for key, rule in wanted.items():
        if key in granted:
            continue
        tenant_id, project_id, role = key
        membership, created = Membership.objects.get_or_create(  # type: ignore[misc]  # a tenant-wide role: no project
            user=user, tenant_id=tenant_id, project_id=project_id, role=role
        )
        if created:
            GrantedRole.objects.create(membership=membership, rule=rule)
            audit(
                action="auth.role_granted",
                actor=user,
                tenant_id=tenant_id,
                message=f"{user.username}: {role} from {rule.claim}={rule.value}",
            )
