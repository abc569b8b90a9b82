"""GET /metrics: Prometheus text, for a Bearer token or a client in the allow-list."""

from __future__ import annotations

import hmac
import ipaddress

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from portal.metrics.collector import exposition


def _allowed_address(addr: str) -> bool:
    try:
        client = ipaddress.ip_address(addr)
    except ValueError:
        return False
    return any(client in ipaddress.ip_network(net, strict=False) for net in settings.GPUBROKER_METRICS_ALLOW)


def _token_given(request: HttpRequest) -> str | None:
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    token, expected = _token_given(request), settings.GPUBROKER_METRICS_TOKEN
    if token is not None:
        if not (expected and hmac.compare_digest(token.encode(), expected.encode())):
            response = HttpResponse("metrics: wrong token\n", status=401, content_type="text/plain")
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
    elif not _allowed_address(request.META.get("REMOTE_ADDR", "")):
        return HttpResponse(
            "metrics: a Bearer token or an allowed client address is needed "
            "(GPUBROKER_METRICS_TOKEN, GPUBROKER_METRICS_ALLOW)\n",
            status=403,
            content_type="text/plain",
        )
    body = exposition(settings.CELERY_BROKER_URL, (settings.CELERY_TASK_DEFAULT_QUEUE,))
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
