"""Redirects: the API's old home, /api/..., answers 308 (method and body kept) to /api/v1/...;
/api/v1/ itself leads to the docs."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponsePermanentRedirect, HttpResponseRedirect
from django.urls import reverse


class PermanentRedirect308(HttpResponsePermanentRedirect):
    status_code = 308


def to_docs(request: HttpRequest) -> HttpResponseRedirect:
    """/api/v1/ itself: the human-readable index of the API."""
    return HttpResponseRedirect(reverse("api-docs"))


def to_v1(request: HttpRequest, rest: str = "") -> PermanentRedirect308:
    query = request.META.get("QUERY_STRING", "")
    return PermanentRedirect308(f"/api/v1/{rest}" + (f"?{query}" if query else ""))
