"""Sign-ins on the audit trail: who, from where, and how (password, OpenID Connect)."""

from __future__ import annotations
from django.contrib.auth.models import User


from broker.services.records.audit import audit


def client_address(request) -> str:
    """REMOTE_ADDR: behind the proxy it is the proxy's, unless the proxy rewrites it; the
    forwarded-for header is not trusted, since any client can send it."""
    return (request.META.get("REMOTE_ADDR", "") if request is not None else "")[:64]


def signin_succeeded(*, user: User, request, method: str = "") -> None:
    backend = getattr(user, "backend", "") or ""
    how = method or ("oidc" if backend.endswith("InstitutionBackend") else "password")
    audit(
        action="auth.signin",
        actor=user,
        message=f"{user.get_username()} signed in ({how})",
        inputs={"address": client_address(request), "method": how},
    )


def signin_failed(*, username: str, request) -> None:
    audit(
        action="auth.signin_failed",
        message=f"failed sign-in as {username!r}",
        inputs={"address": client_address(request), "username": username},
    )
