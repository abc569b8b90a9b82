"""The API's old home, /api/...: each path answers 308 (method and body kept) to /api/v1/..."""
from __future__ import annotations

from django.http import HttpRequest, HttpResponsePermanentRedirect


class PermanentRedirect308(HttpResponsePermanentRedirect):
    status_code = 308


def to_v1(request: HttpRequest, rest: str = "") -> PermanentRedirect308:
    query = request.META.get("QUERY_STRING", "")
    return PermanentRedirect308(f"/api/v1/{rest}" + (f"?{query}" if query else ""))
