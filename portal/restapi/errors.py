"""The API's one error shape:
``{"error": {"code": "<snake_case>", "message": "<text>", "fields": {"<field>": ["<msg>"]}}}``.

The one exception handler: DRF's own errors, Django's 404 and 403, and the services'
domain errors (each a ``DomainError`` that declares its own status, code and fields, as the
pages read them too), so no API view maps an error by hand."""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler

from portal.tenancy.errors import DomainError

# What each status says when the exception names no code of its own.
_DEFAULT_CODES = {
    400: "invalid",
    401: "not_authenticated",
    403: "permission_denied",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    415: "unsupported_media_type",
    429: "throttled",
}


def error_body(code: str, message: str, fields: dict[str, list[str]] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "fields": fields or {}}}


def api_exception_handler(exc: Exception, context: dict) -> Response | None:
    if isinstance(exc, DomainError) and exc.status == status.HTTP_400_BAD_REQUEST:
        exc = exceptions.ValidationError(exc.field_messages() or {"non_field_errors": [str(exc)]})
    elif isinstance(exc, DomainError):
        return Response(error_body(exc.code, str(exc), exc.field_messages()), status=exc.status)
    response = exception_handler(exc, context)  # Django's Http404 / PermissionDenied included
    if response is None:
        return None  # a real server error: Django's 500 (and its logging) stay as they are
    if isinstance(exc, exceptions.ValidationError):
        fields = _fields(exc.detail)
        body = error_body("invalid", _summary(fields), fields)
    else:
        detail = getattr(exc, "detail", None)
        code = getattr(detail, "code", None) or _DEFAULT_CODES.get(response.status_code, "error")
        if code in ("invalid", "error") and response.status_code != status.HTTP_400_BAD_REQUEST:
            code = _DEFAULT_CODES.get(response.status_code, "error")
        message = str(detail) if detail is not None else response.status_text
        if response.status_code == 404 and code == "not_found":
            message = "Not found."  # the same words for a missing object and an outsider's
        body = error_body(str(code), message)
    response.data = body
    return response


def _fields(detail: Any) -> dict[str, list[str]]:
    """Field name -> messages; nested errors are flattened to dotted names."""
    if isinstance(detail, dict):
        out: dict[str, list[str]] = {}
        for key, value in detail.items():
            if isinstance(value, dict):
                out.update({f"{key}.{k}": v for k, v in _fields(value).items()})
            else:
                out[str(key)] = _messages(value)
        return out
    return {"non_field_errors": _messages(detail)}


def _messages(value: Any) -> list[str]:
    if isinstance(value, (list, tuple)):
        flat: list[str] = []
        for item in value:
            flat.extend(_messages(item) if isinstance(item, (list, tuple, dict)) else [str(item)])
        return flat
    if isinstance(value, dict):
        return [f"{k}: {' '.join(_messages(v))}" for k, v in value.items()]
    return [str(value)]


def _summary(fields: dict[str, list[str]]) -> str:
    if not fields:
        return "Invalid input."
    named = [name for name in fields if name != "non_field_errors"]
    if not named:
        return " ".join(fields["non_field_errors"])
    return "Invalid input: " + ", ".join(named) + "."
