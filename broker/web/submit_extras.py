"""The submit form's companions: Preview (placement without reserving anything) and Run
again (with or without changes) from an ended workload.  Thin: services write, selectors read."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.urls import reverse
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from broker.models import Workload
from broker.models.workload import TERMINAL_STATES
from broker.access import workload_for
from broker.services.submitting.preview import workload_preview
from broker.services.submitting.workloads import workload_submit
from broker.web.explain import RULE_WORDS
from broker.web.forms import WorkloadForm
from broker.web.htmx import HtmxHttpRequest
from portal.tenancy.refusals import redirect_on_refusal, refusal_fields
from portal.tenancy.access import require_role
from portal.tenancy.errors import DomainError
from portal.tenancy.models import Role
from portal.tenancy.selectors import project_list
from portal.tenancy.access import AnyUser, signed_in

_LIST_FIELDS = ("gpu_models", "residency")  # lists in the spec, comma-separated text in the form


@login_required
@require_POST
def workload_preview_view(request: HtmxHttpRequest) -> HttpResponse:
    """HTMX: the submit form's Preview button; the table of destinations, or the form's errors."""
    require_role(request.user, Role.RESEARCHER)
    form = WorkloadForm(request.POST, projects=project_list(user=request.user, roles=(Role.RESEARCHER,)))
    context: dict = {"errors": {}}
    if form.is_valid():
        try:
            context["preview"] = workload_preview(
                user=signed_in(request.user), project_id=form.cleaned_data["project"].id, spec_data=form.spec_data()
            )
        except DomainError as exc:
            context["errors"] = refusal_fields(exc)  # named as the spec names them
    else:
        context["errors"] = {k: [str(e) for e in v] for k, v in form.errors.items()}
    if "preview" in context:
        context["excluded"] = [
            (name, RULE_WORDS.get(e["rule"], e["rule"]), e["message"])
            for name, e in context["preview"].excluded.items()
        ]
    # htmx swaps only 2xx answers: the form's errors come back as a 200 partial there
    bad = context["errors"] and not request.htmx
    return render(request, "broker/_workload_preview.html", context, status=400 if bad else 200)


def ended_workload(*, user: AnyUser, workload_id: int) -> Workload:
    """The workload to run again: the project's researchers' (403 or 404 otherwise), and ended."""
    workload = workload_for(user=user, workload_id=workload_id, need="resubmit")
    if workload.state not in TERMINAL_STATES:
        raise PermissionDenied("only an ended workload can be run again")
    return workload


def resubmit_initial(workload: Workload) -> dict:
    """The submit form's initial values from a workload's stored spec."""
    spec = dict(workload.spec or {})
    spec.pop("project", None)
    for name in _LIST_FIELDS:
        spec[name] = ", ".join(spec.get(name) or ())
    return {**spec, "project": workload.project_id, "resubmit_of": workload.id}


def _edit_instead(request: HttpRequest, workload_id: int) -> str:
    return f"{reverse('workload-new')}?from={workload_id}"


@login_required
@require_POST
@redirect_on_refusal(_edit_instead)  # the fleet changed since (a class or location gone): edit it instead
def workload_run_again(request: HttpRequest, workload_id: int) -> HttpResponse:
    """Run again, unchanged: a new workload from the same spec, linked to the old one."""
    source = ended_workload(user=request.user, workload_id=workload_id)
    spec = {k: v for k, v in (source.spec or {}).items() if k != "project"}
    workload = workload_submit(
        user=signed_in(request.user), project_id=source.project_id, spec_data=spec, resubmit_of=source
    )
    messages.success(request, f"Submitted {workload.name} ({workload.uid}) again.")
    return redirect("workload-detail", workload_id=workload.id)
