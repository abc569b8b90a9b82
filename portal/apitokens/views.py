"""/account/tokens/: a user's own API tokens; the secret is shown once, on creation."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from portal.apitokens.forms import TokenForm
from portal.apitokens.selectors import token_list
from portal.apitokens.services.tokens import token_create, token_revoke
from portal.tenancy.access import signed_in


@login_required
def token_page(request: HttpRequest) -> HttpResponse:
    form = TokenForm(request.POST or None)
    created = None
    if request.method == "POST" and form.is_valid():
        created = token_create(actor=signed_in(request.user), **form.cleaned_data)
        form = TokenForm()
    now = timezone.now()
    tokens = [(t, t.state(now)) for t in token_list(user=request.user)]
    # the secret is in this one answer only: never stored, never redirected to a page that shows it
    response = render(
        request,
        "account/tokens.html",
        {"form": form, "tokens": tokens, "created": created},
        status=400 if form.errors else 200,
    )
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def token_revoke_view(request: HttpRequest, token_id: int) -> HttpResponse:
    token = token_revoke(actor=signed_in(request.user), token_id=token_id)  # 404 for another user's token
    messages.success(request, f"Revoked {token.name} ({token.prefix}...).")
    return redirect("account-tokens")
