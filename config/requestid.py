"""X-Request-ID: every request has an id, on each line logged while it is answered and on
its response, so an operator can find a request's lines from what a user or a proxy saw."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable

from django.core.signals import request_finished
from django.http import HttpRequest, HttpResponse

from broker.logcontext import request_bind, request_forget

HEADER = "X-Request-ID"
# a proxy's id is kept when it is a plain token; anything else (too long, spaces, quotes,
# control characters) could forge or break log lines, and is replaced by one of ours
SANE = re.compile(r"[A-Za-z0-9._:-]{1,64}")


def request_id_of(request: HttpRequest) -> str:
    given = request.headers.get(HEADER, "")
    return given if SANE.fullmatch(given) else uuid.uuid4().hex


def _forget(**_: object) -> None:
    request_forget()


class RequestIdMiddleware:
    """Binds the request's id (``broker.logcontext``) and echoes it in the response.  The id
    is forgotten when the response is closed (``request_finished``), not when this returns:
    Django logs a 4xx answer after the middleware chain, and that line belongs to the request."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        request_finished.connect(_forget, dispatch_uid="gpubroker-request-id")

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id = request_id_of(request)
        request_bind(request_id)
        response = self.get_response(request)
        response[HEADER] = request_id
        return response
