from __future__ import annotations

from django.http import HttpRequest

from portal.tenancy.access import is_operator, roles_of


def roles(request: HttpRequest) -> dict[str, object]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"user_roles": set(), "is_operator": False}
    return {"user_roles": roles_of(user), "is_operator": is_operator(user)}
