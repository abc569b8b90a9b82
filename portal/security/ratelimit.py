"""A small fixed-window rate limiter on the cache, for sign-in and token endpoints.

One counter per (rule, client address, window); a client over the limit gets 429 with
Retry-After, in the API's error shape on /api/ paths.  Only the listed methods and path
prefixes are counted, so pages and polling are never slowed.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse, JsonResponse

from portal.security.services.signin import client_address


@dataclass(frozen=True)
class Rule:
    name: str
    prefixes: tuple[str, ...]
    methods: tuple[str, ...]
    limit: int
    window_s: int


def rules() -> tuple[Rule, ...]:
    per_min = settings.GPUBROKER_SIGNIN_RATE_PER_MINUTE
    return (
        Rule("signin", ("/login/",), ("POST",), per_min, 60),
        Rule("oidc", ("/oidc/authenticate/", "/oidc/callback/"), ("GET",), per_min, 60),
        Rule("tokens", ("/api/v1/tokens/", "/account/tokens/"), ("POST",), per_min, 60),
    )


def over_limit(rule: Rule, address: str) -> int:
    """0 when the request may go on, else the seconds until the window ends."""
    now = int(time.time())
    window = now // rule.window_s
    key = f"ratelimit:{rule.name}:{address}:{window}"
    cache.add(key, 0, rule.window_s + 1)
    try:
        count = cache.incr(key)
    except ValueError:  # evicted between add and incr: count this one as the first
        cache.set(key, 1, rule.window_s + 1)
        count = 1
    return 0 if count <= rule.limit else (window + 1) * rule.window_s - now


class RateLimitMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        for rule in rules():
            if request.method in rule.methods and request.path.startswith(rule.prefixes):
                wait = over_limit(rule, client_address(request))
                if wait:
                    return _too_many(request, wait)
        return self.get_response(request)


def _too_many(request: HttpRequest, wait: int) -> HttpResponse:
    message = f"too many attempts; try again in {wait} s"
    if request.path.startswith("/api/"):
        response = JsonResponse({"error": {"code": "rate_limited", "message": message, "fields": {}}}, status=429)
    else:
        response = HttpResponse(message, status=429, content_type="text/plain")
    response["Retry-After"] = str(max(1, wait))
    return response
