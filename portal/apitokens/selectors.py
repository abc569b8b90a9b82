"""Reads of API tokens: a user sees their own, an operator sees everyone's."""

from __future__ import annotations

from typing import cast

from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from portal.apitokens.models import ApiToken
from portal.tenancy.access import AnyUser, is_operator


def token_list(*, user: AnyUser, everyone: bool = False) -> QuerySet[ApiToken]:
    if not user.is_authenticated:
        return ApiToken.objects.none()
    qs = ApiToken.objects.select_related("user", "revoked_by")
    return qs if everyone and is_operator(user) else qs.filter(user=cast(User, user))  # authenticated here


def token_get(*, user: AnyUser, token_id: int) -> ApiToken:
    return get_object_or_404(token_list(user=user, everyone=True), id=token_id)


def token_by_secret(*, token_hash: str) -> ApiToken | None:
    """The token behind a presented secret (any state): authentication decides what it may do."""
    return ApiToken.objects.select_related("user").filter(token_hash=token_hash).first()
