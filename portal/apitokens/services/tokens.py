"""Creating and revoking API tokens; both are written to the audit trail."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from broker.services.records.audit import audit
from portal.apitokens.models import TOKEN_PREFIX, ApiToken
from portal.apitokens.selectors import token_get

MAX_EXPIRY_DAYS = 365
LAST_USED_RESOLUTION = timedelta(minutes=1)  # fewer writes: one per token per minute at most


@dataclass(frozen=True)
class NewToken:
    token: ApiToken
    secret: str  # shown to the user once, never stored


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@transaction.atomic
def token_create(*, actor: User, name: str, expires_in_days: int) -> NewToken:
    """A token for ``actor`` itself; a caller validates ``name`` and the expiry's range."""
    if not 1 <= expires_in_days <= MAX_EXPIRY_DAYS:
        raise ValueError(f"expires_in_days: must be between 1 and {MAX_EXPIRY_DAYS}")
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=actor,
        name=name,
        prefix=secret[: len(TOKEN_PREFIX) + 6],
        token_hash=hash_secret(secret),
        expires_at=timezone.now() + timedelta(days=expires_in_days),
    )
    audit(
        action="api_token.created",
        actor=actor,
        message=f"{actor.username}: token {token.name!r} ({token.prefix}...) until {token.expires_at:%Y-%m-%d}",
    )
    return NewToken(token=token, secret=secret)


@transaction.atomic
def token_revoke(*, actor: User, token_id: int) -> ApiToken:
    """Revoke a token the actor may see (its own; an operator: any).  Revoking twice is harmless."""
    token = token_get(user=actor, token_id=token_id)
    if ApiToken.objects.filter(id=token.id, revoked_at__isnull=True).update(
        revoked_at=timezone.now(), revoked_by=actor
    ):
        audit(
            action="api_token.revoked",
            actor=actor,
            message=f"{token.user.username}: token {token.name!r} ({token.prefix}...)",
        )
    return ApiToken.objects.select_related("user").get(id=token.id)


def token_touch(*, token: ApiToken) -> None:
    """Note a use; at most once a minute, so that a busy client does not write on every call."""
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(id=token.id).update(last_used_at=now)
        token.last_used_at = now
