"""A small fixed-window rate limiter on the cache, for sign-in and token endpoints.

One counter per (rule, client address, window).  At /login/ only *failed* attempts count
(the form shown again instead of a redirect): many people behind one address may sign in,
but nobody may guess passwords from it.  Token creation (not revocation) and the OpenID
Connect endpoints count every request.  A client over a limit gets 429 with Retry-After (the API's error
shape on /api/); only the listed methods and paths are counted, so pages and polling are
never slowed.
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
    window_s: int = 60
    failures_only: bool = False
    exact: bool = False  # the paths themselves, not what lies below them

    def matches(self, request: HttpRequest) -> bool:
        if request.method not in self.methods:
            return False
        return request.path in self.prefixes if self.exact else request.path.startswith(self.prefixes)

    def counts(self, response: HttpResponse) -> bool:
        return not self.failures_only or response.status_code not in (301, 302, 303)


def rules() -> tuple[Rule, ...]:
    per_min = settings.GPUBROKER_SIGNIN_RATE_PER_MINUTE
    return (
        Rule("signin", ("/login/",), ("POST",), per_min, failures_only=True),
        # a start and a callback per sign-in, from everyone behind one address
        Rule("oidc", ("/oidc/authenticate/", "/oidc/callback/"), ("GET",), per_min * 6),
        # creating tokens only: revoking one (below these paths) is never held back
        Rule("tokens", ("/api/v1/tokens/", "/account/tokens/"), ("POST",), per_min, exact=True),
    )


def _key(rule: Rule, address: str, now: int) -> tuple[str, int]:
    window = now // rule.window_s
    return f"ratelimit:{rule.name}:{address}:{window}", (window + 1) * rule.window_s - now


def _count(key: str, ttl: int) -> None:
    cache.add(key, 0, ttl)
    try:
        cache.incr(key)
    except ValueError:  # evicted between add and incr: this one is the first
        cache.set(key, 1, ttl)


class RateLimitMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        matched = [r for r in rules() if r.matches(request)]
        if not matched:
            return self.get_response(request)
        address, now = client_address(request), int(time.time())
        for rule in matched:
            key, left = _key(rule, address, now)
            if (cache.get(key) or 0) >= rule.limit:
                return _too_many(request, left)
        response = self.get_response(request)
        for rule in matched:
            if rule.counts(response):
                key, _ = _key(rule, address, now)
                _count(key, rule.window_s + 1)
        return response


def _too_many(request: HttpRequest, wait: int) -> HttpResponse:
    message = f"too many attempts; try again in {wait} s"
    response: HttpResponse
    if request.path.startswith("/api/"):
        response = JsonResponse({"error": {"code": "rate_limited", "message": message, "fields": {}}}, status=429)
    else:
        response = HttpResponse(message, status=429, content_type="text/plain")
    response["Retry-After"] = str(max(1, wait))
    return response
