"""Sign-ins on the audit trail: who, from where, and how (password, OpenID Connect)."""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.contrib.auth.models import User


from broker.services.records.audit import audit


def _trusted(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return False
    return any(ip in ipaddress.ip_network(net, strict=False) for net in settings.GPUBROKER_TRUSTED_PROXIES)


def client_address(request) -> str:
    """REMOTE_ADDR, unless it is a trusted proxy's (GPUBROKER_TRUSTED_PROXIES): then the
    X-Forwarded-For list read from the right, each trusted proxy skipped; the first address
    that is not one is the client's. What lies left of it the client may have written itself,
    so it is never read; a list of trusted proxies only gives the leftmost."""
    if request is None:
        return ""
    address = request.META.get("REMOTE_ADDR", "")
    if not _trusted(address):
        return address[:64]
    hops = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
    for hop in reversed(hops):
        address = hop
        if not _trusted(hop):
            break
    return address[:64]


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
