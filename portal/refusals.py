"""Domain errors -> what the client is told: one table for the API and the pages.

The services raise their own errors (a spec that does not validate, a quota below its use,
a decision that may not be taken).  This table says, once, what status each one is, with
which code, and which field it names; the API's exception handler
(``broker.api.errors``) answers with it, and the pages put the same words on the form
(``form_refused``) or in a message before a redirect (``redirect_on_refusal``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect


@dataclass(frozen=True)
class Refusal:
    status: int
    code: str
    message: str
    fields: dict[str, list[str]]  # field -> messages; empty when the error names no field


@dataclass(frozen=True)
class _Rule:
    status: int
    code: str = "invalid"
    field: str = ""  # the field named when the error carries none of its own
    forbidden: tuple[str, ...] = ()  # fields whose refusal is a 403 (who, not what)


@functools.cache
def _rules() -> dict[type[Exception], _Rule]:
    # imported here: the services import models, and this module is imported by settings-time code
    from accounting.services.bills import BillRejected
    from broker.api.services import IdempotencyKeyReused
    from broker.policyrelease.services.releases import ReleaseRefused
    from broker.policyrelease.validation import PolicyInvalid
    from broker.services.notifications import PreferenceRefused
    from broker.services.outage import OutageRefused
    from broker.services.quota import QuotaBelowUse
    from broker.services.quota_owners import OwnerRefused
    from broker.services.quota_requests import QuotaRequestRefused
    from broker.services.webhook_guard import UnsafeWebhookUrl
    from broker.spec import SpecError
    from broker.workload_logs import LogQueryError
    from portal.identity.services.cluster_identity import IdentityInvalid

    return {
        SpecError: _Rule(400),
        LogQueryError: _Rule(400),
        IdentityInvalid: _Rule(400),
        QuotaBelowUse: _Rule(400, field="limit_gpus"),
        QuotaRequestRefused: _Rule(400),
        PreferenceRefused: _Rule(400),
        OwnerRefused: _Rule(400),
        UnsafeWebhookUrl: _Rule(400),
        PolicyInvalid: _Rule(400, field="content"),
        BillRejected: _Rule(400, field="file"),
        IdempotencyKeyReused: _Rule(409, "idempotency_key_reused", field="Idempotency-Key"),
        OutageRefused: _Rule(409, "refused"),
        ReleaseRefused: _Rule(409, "refused", forbidden=("approver",)),
    }


def domain_errors() -> tuple[type[Exception], ...]:
    return tuple(_rules())


def refusal_of(exc: BaseException) -> Refusal | None:
    """What to tell the client about ``exc``; None for anything that is not a domain error."""
    rule = next((r for cls, r in _rules().items() if isinstance(exc, cls)), None)
    if rule is None:
        return None
    fields = _fields(exc, rule)
    status = 403 if set(fields) & set(rule.forbidden) else rule.status
    return Refusal(status, "permission_denied" if status == 403 else rule.code, str(exc), fields)


def _fields(exc: BaseException, rule: _Rule) -> dict[str, list[str]]:
    for name in ("errors", "fields"):  # SpecError, LogQueryError: errors; IdentityInvalid: fields
        value = getattr(exc, name, None)
        if isinstance(value, dict):
            return {str(k): [str(m) for m in (v if isinstance(v, (list, tuple)) else [v])] for k, v in value.items()}
    field = getattr(exc, "field", None) or rule.field
    return {str(field): [str(exc)]} if field else {}


def form_refused(form: Any, exc: Exception) -> None:
    """The page helper for a form: each message on the field it names (or on the form)."""
    for field, words in refusal_fields(exc).items():
        form.add_error(field if field in form.fields else None, " ".join(words))


def refusal_fields(exc: Exception) -> dict[str, list[str]]:
    """Field -> messages of a domain error (its message under "" when it names no field)."""
    refusal = refusal_of(exc)
    if refusal is None:
        raise exc
    return refusal.fields or {"": [refusal.message]}


def refusal_text(exc: Exception) -> str:
    """One line naming each field, for a message or a plain-text 400."""
    refusal = refusal_of(exc)
    if refusal is None:
        raise exc
    if not refusal.fields:
        return refusal.message
    return "; ".join(f"{k}: {' '.join(v)}" for k, v in refusal.fields.items())


def redirect_on_refusal(to: str | Callable[..., str]) -> Callable:
    """The page helper for an action without a form of its own: a domain error becomes an
    error message on the page the user is sent back to (``to``: a URL name, or a function of
    the view's arguments giving the URL)."""

    def wrap(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @functools.wraps(view)
        def inner(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            try:
                return view(request, *args, **kwargs)
            except domain_errors() as exc:
                messages.error(request, refusal_text(exc))
                return redirect(to(request, *args, **kwargs) if callable(to) else to)

        return inner

    return wrap
