"""The queue page's query string: which state, which page (keyset cursors), and the URL its
live refresh polls, so a refresh shows the same page it was drawn from."""

from __future__ import annotations

from typing import Any, Mapping

from django.core.exceptions import ImproperlyConfigured
from django.http import QueryDict
from django.urls import reverse

from broker.models import WorkloadState
from broker.selectors.workloads import Cursor

# htmx stops polling an element whose request is answered with this status
HTMX_STOP_POLLING = 286
_KNOWN = {"state", "before", "after"}


def queue_query(params: Mapping[str, str]) -> dict[str, Any]:
    """``state``, ``before`` and ``after`` from the query string; ValueError names the field."""
    unknown = sorted(set(params) - _KNOWN)
    if unknown:
        raise ValueError(f"unknown parameter(s) {', '.join(unknown)}; known: {', '.join(sorted(_KNOWN))}")
    state = params.get("state", "")
    if state and state not in WorkloadState.values:
        raise ValueError(f"state: unknown state {state[:40]!r}; one of {', '.join(WorkloadState.values)}")
    query: dict[str, Any] = {"state": state, "before": None, "after": None}
    for name in ("before", "after"):
        if params.get(name):
            try:
                query[name] = Cursor.decode(params[name])
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None
    if query["before"] and query["after"]:
        raise ValueError("before, after: give one of them, not both")
    return query


def poll_query(query: Mapping[str, Any]) -> str:
    """The query string that asks for this same page again."""
    out = QueryDict(mutable=True)
    if query["state"]:
        out["state"] = query["state"]
    for name in ("before", "after"):
        if query[name]:
            out[name] = query[name].encode()
    return out.urlencode()


def detail_url_prefix() -> str:
    """A workload page's URL up to its id; each row appends ``<id>/``.  A ``{% url %}`` per
    row was 30% of rendering the rows, which every open tab asks for every 2 s."""
    prefix, marker, rest = reverse("workload-detail", args=[987654321]).rpartition("987654321")
    if not marker or rest != "/":
        raise ImproperlyConfigured("workload-detail must end in <id>/ for the queue page's row links")
    return prefix
