"""Domain errors on the pages: the same words the API answers with, put on the form
(``form_refused``), in a message before a redirect (``redirect_on_refusal``) or in a plain
400 (``refusal_text``).

Each error says what it means itself (``portal.tenancy.errors.DomainError``: its status, code
and field); these helpers read those attributes, so they know no error class and import
nothing from ``broker`` or ``accounting``."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect

from portal.tenancy.errors import DomainError


def form_refused(form: Any, exc: DomainError) -> None:
    """The page helper for a form: each message on the field it names (or on the form)."""
    for field, words in refusal_fields(exc).items():
        form.add_error(field if field in form.fields else None, " ".join(words))


def refusal_fields(exc: DomainError) -> dict[str, list[str]]:
    """Field -> messages of a domain error (its message under "" when it names no field)."""
    return exc.field_messages() or {"": [str(exc)]}


def refusal_text(exc: DomainError) -> str:
    """One line naming each field, for a message or a plain-text 400."""
    fields = exc.field_messages()
    if not fields:
        return str(exc)
    return "; ".join(f"{k}: {' '.join(v)}" for k, v in fields.items())


def redirect_on_refusal(to: str | Callable[..., str]) -> Callable:
    """The page helper for an action without a form of its own: a domain error becomes an
    error message on the page the user is sent back to (``to``: a URL name, or a function of
    the view's arguments giving the URL)."""

    def wrap(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @functools.wraps(view)
        def inner(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            try:
                return view(request, *args, **kwargs)
            except DomainError as exc:
                messages.error(request, refusal_text(exc))
                return redirect(to(request, *args, **kwargs) if callable(to) else to)

        return inner

    return wrap
