"""The request the pages see: django-htmx's middleware adds ``request.htmx`` to every one."""

from __future__ import annotations

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    """For type checking only: views annotate their request with it; nothing builds one."""

    htmx: HtmxDetails
