"""Keyset pagination for every API list: ``?limit=`` (1..200) and an opaque ``?cursor=``.

The cursor holds the last row's key, so a page is one index range scan however deep it
is, and rows added meanwhile neither repeat nor vanish.  A view names its key with
``keyset_ordering`` ("-id", the default, or "id"); a list that is not a queryset (an
aggregate computed in Python) is paged by position the same way."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from django.db.models import QuerySet
from portal.tenancy.numbers import whole_number
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import BasePagination
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param

DEFAULT_LIMIT = 50
MAX_LIMIT = 200


def _encode(value: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"k": value}).encode()).decode().rstrip("=")


def _decode(raw: str) -> int:
    try:
        data = json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
        value = data["k"]
    except (binascii.Error, ValueError, TypeError, KeyError, UnicodeDecodeError):
        raise ValidationError({"cursor": ["is not a cursor this API gave out."]}) from None
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**63:
        raise ValidationError({"cursor": ["is not a cursor this API gave out."]})
    return value


def parse_limit(raw: str | None) -> int:
    if raw is None or raw == "":
        return DEFAULT_LIMIT
    value = whole_number(raw)
    if value is None or not 1 <= value <= MAX_LIMIT:
        raise ValidationError({"limit": [f"must be a whole number from 1 to {MAX_LIMIT}."]})
    return value


class KeysetPagination(BasePagination):
    def paginate_queryset(self, queryset: Any, request, view=None) -> list:
        self.request = request
        self.limit = parse_limit(request.query_params.get("limit"))
        raw_cursor = request.query_params.get("cursor")
        after = _decode(raw_cursor) if raw_cursor else None
        if isinstance(queryset, QuerySet):
            rows, self.next_key = self._page_queryset(queryset, after, getattr(view, "keyset_ordering", "-id"))
        else:
            start = after or 0
            rows = list(queryset[start : start + self.limit + 1])
            self.next_key = start + self.limit if len(rows) > self.limit else None
        return rows[: self.limit]

    def _page_queryset(self, queryset: QuerySet, after: int | None, ordering: str) -> tuple[list, int | None]:
        descending = ordering.startswith("-")
        if after is not None:
            queryset = queryset.filter(**{"id__lt" if descending else "id__gt": after})
        rows = list(queryset.order_by(ordering)[: self.limit + 1])
        return rows, (rows[self.limit - 1].id if len(rows) > self.limit else None)

    def get_paginated_response(self, data) -> Response:
        return Response({"results": data, "next": self._next_link()})

    def _next_link(self) -> str | None:
        if self.next_key is None:
            return None
        url = self.request.build_absolute_uri()
        return replace_query_param(url, "cursor", _encode(self.next_key))

    def get_paginated_response_schema(self, schema: dict) -> dict:
        return {
            "type": "object",
            "required": ["results", "next"],
            "properties": {
                "results": schema,
                "next": {
                    "type": "string",
                    "nullable": True,
                    "format": "uri",
                    "description": "The next page, or null on the last one",
                },
            },
        }

    def get_schema_operation_parameters(self, view) -> list[dict]:
        return [
            {
                "name": "limit",
                "required": False,
                "in": "query",
                "description": f"Rows per page, 1 to {MAX_LIMIT}",
                "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT},
            },
            {
                "name": "cursor",
                "required": False,
                "in": "query",
                "description": "Where the next page starts (from the previous page's `next`)",
                "schema": {"type": "string"},
            },
        ]
