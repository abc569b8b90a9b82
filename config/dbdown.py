"""While the database cannot answer (a restart, a failover), a request that needed it gets a
503 with Retry-After, not Django's 500: nothing is lost (the transaction rolled back), the
client is told to try again, and the API keeps its one error shape. The stack's kills under
load showed the 500s (tests/ops/stack/test_faults.py: PostgreSQL restarted mid-load)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.template import loader

from portal.restapi.errors import error_body

log = logging.getLogger(__name__)
RETRY_AFTER_S = 5
MESSAGE = "The database is not answering (a restart or a failover); nothing was changed. Try again in a few seconds."


class DatabaseUnavailableMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, (OperationalError, InterfaceError)):
            return None
        log.error("database unavailable while answering %s %s: %s", request.method, request.path, exception)
        if request.path.startswith("/api/"):
            body, content_type = json.dumps(error_body("database_unavailable", MESSAGE)), "application/json"
        else:
            # rendered without the request: the base page's context reads the database
            body, content_type = loader.get_template("503.html").render({"message": MESSAGE}), "text/html"
        response = HttpResponse(body, status=503, content_type=content_type)
        response["Retry-After"] = str(RETRY_AFTER_S)
        return response
