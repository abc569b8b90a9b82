"""Policy release pages (platform operators).  Thin: selectors read, services write."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from broker.policyrelease import selectors
from broker.policyrelease.forms import ProposeForm
from broker.policyrelease.impact import COLUMNS
from broker.policyrelease.services import impact as impact_services
from broker.policyrelease.services import releases as release_services
from broker.policyrelease.validation import check_policy
from broker.web.htmx import HtmxHttpRequest
from portal.tenancy.refusals import form_refused
from portal.tenancy.access import require_operator, signed_in
from portal.tenancy.errors import DomainError

_ACTIONS = {
    "approve": release_services.release_approve,
    "activate": release_services.release_activate,
    "rollback": release_services.release_rollback,
    "withdraw": release_services.release_withdraw,
    "impact": impact_services.impact_request,
}


def _operator(request: HttpRequest) -> None:
    require_operator(request.user, hidden=True)  # policy is the fleet's: nobody else learns it exists


@login_required
def release_list(request: HttpRequest) -> HttpResponse:
    _operator(request)
    return render(request, "policyrelease/release_list.html", {"releases": selectors.release_list(user=request.user)})


@login_required
def release_propose(request: HttpRequest) -> HttpResponse:
    _operator(request)
    active = selectors.release_active()
    form = ProposeForm(
        request.POST if request.method == "POST" else None,
        user=signed_in(request.user),
        initial={"content": active.content if active else ""},
    )
    diff, problem = [], None
    if request.method == "POST" and form.is_valid():
        content = form.cleaned_data["content"]
        diff = selectors.text_diff(active.content if active else "", content)
        try:
            check_policy(content)
            if "preview" not in request.POST:
                release = release_services.release_propose(
                    actor=signed_in(request.user),
                    content=content,
                    owner=form.cleaned_data["owner"],
                    summary=form.cleaned_data["summary"],
                )
                assert release.owner is not None  # proposing names the owner
                messages.success(
                    request, f"Version {release.number} proposed; {release.owner.get_username()} approves it."
                )
                return redirect("policy-detail", release_id=release.id)
        except DomainError as exc:
            problem = exc.details[0] if exc.details else None  # a bad policy: its line and field
            form_refused(form, exc)
    status = 400 if request.method == "POST" and (form.errors or problem) else 200
    return render(
        request,
        "policyrelease/release_propose.html",
        {"form": form, "diff": diff, "problem": problem, "active": active},
        status=status,
    )


@login_required
def release_detail(request: HtmxHttpRequest, release_id: int) -> HttpResponse:
    release = selectors.release_get(user=request.user, release_id=release_id)
    active = selectors.release_active()
    impact = selectors.impact_latest(release=release)
    context = {
        "release": release,
        "active": active,
        "impact": impact,
        "columns": COLUMNS,
        "diff": selectors.release_diff(release, active) if active and active.id != release.id else [],
        "transitions": release.transitions.select_related("actor"),
        "impact_rows": selectors.impact_rows(impact),
    }
    template = "policyrelease/release_detail.html"
    return render(request, f"{template}#impact" if request.htmx else template, context)


@login_required
@require_POST
def release_action(request: HttpRequest, release_id: int, action: str) -> HttpResponse:
    release = selectors.release_get(user=request.user, release_id=release_id)
    service = _ACTIONS.get(action)
    if service is None:
        raise Http404("no such action")
    try:
        service(actor=signed_in(request.user), release_id=release.id)
    except DomainError as exc:  # 403 for the approver, else 409
        return render(
            request, "policyrelease/refused.html", {"release": release, "message": str(exc)}, status=exc.status
        )
    messages.success(request, _DONE[action].format(n=release.number))
    return redirect("policy-detail", release_id=release.id)


_DONE = {
    "approve": "Version {n} approved.",
    "activate": "Version {n} is now in force.",
    "rollback": "Rolled back: version {n} is in force again.",
    "withdraw": "Version {n} withdrawn.",
    "impact": "Impact replay of version {n} started.",
}
