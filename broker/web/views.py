"""Researcher and admin pages.  Thin: selectors read, services write, templates show.

HTMX requests get the named partial of the same template (django-htmx pattern:
one view per URL, ``page.html#partial``)."""

from __future__ import annotations

from typing import cast

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.forms import ModelChoiceField
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.utils.cache import get_conditional_response, patch_vary_headers
from django.views.decorators.http import require_POST

from broker.models import GpuClass
from broker.access import escalation_for, quota_for, workload_for
from broker.selectors.workloads import (
    WORKLOAD_ROLES,
    escalation_list,
    quota_list,
    reservation_list,
    workload_page,
    workload_timeline,
)
from broker.services.following.escalations import escalation_acknowledge, escalation_resolve
from broker.services.quota.reservations import quota_set, quota_use
from broker.services.submitting.workloads import workload_cancel, workload_submit
from broker.selectors import overview as overview_selectors
from broker.outcomes import workload_outcome
from broker.placement.record import PlacementRecord
from broker.web.explain import RULE_WORDS, reason_words
from broker.workload_logs import workload_last_lines
from broker.web.forms import EscalationResolveForm, QuotaForm, WorkloadForm
from broker.web.htmx import HtmxHttpRequest
from broker.web.submit_extras import ended_workload, resubmit_initial
from broker.web.queue import HTMX_STOP_POLLING, detail_url_prefix, poll_query, queue_query
from portal.metrics.selectors import fleet_charts
from portal.tenancy.refusals import form_refused
from portal.tenancy.access import is_operator, require_role, signed_in
from portal.tenancy.errors import DomainError
from portal.tenancy.numbers import whole_number
from portal.tenancy.models import Role
from portal.tenancy.selectors import project_list
from demo.outage import simulated_outages
from broker.services.fleet.policy import policy_in_force


def _partial(request: HtmxHttpRequest, template: str, name: str) -> str:
    return f"{template}#{name}" if request.htmx else template


@login_required
def workload_list_page(request: HtmxHttpRequest) -> HttpResponse:
    """The queue, 50 rows a page.  Its htmx refresh is what every open tab sends every 2 s, so
    it costs as little as it can: rows that can no longer change end the polling (htmx's
    286), and an unchanged page is a 304 with no rendering at all."""
    require_role(request.user, *WORKLOAD_ROLES)  # admins follow their tenants' workloads too, as the API
    try:
        query = queue_query(request.GET)
    except ValueError as exc:
        return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")  # echoes input
    page = workload_page(user=request.user, **query)
    context = {
        "workloads": page.rows,
        "page": page,
        "state": query["state"],
        "poll_query": poll_query(query),
        "detail_prefix": detail_url_prefix(),
    }
    if not request.htmx:
        return render(request, "broker/workload_list.html", context)
    # the rows alone need no context processors (navigation, roles, background status): the
    # page around them was drawn once, the refresh only replaces the rows
    if not page.live:
        return HttpResponse(render_to_string("broker/workload_list.html#rows", context), status=HTMX_STOP_POLLING)
    etag = f'"{request.user.pk}-{page.fingerprint()}"'
    unchanged = get_conditional_response(request, etag=etag)
    response = unchanged or HttpResponse(render_to_string("broker/workload_list.html#rows", context))
    response.headers["ETag"] = etag
    response.headers["Cache-Control"] = "private, no-cache"  # always ask; the answer is often 304
    patch_vary_headers(response, ["HX-Request"])
    return response


@login_required
def workload_new(request: HttpRequest) -> HttpResponse:
    require_role(request.user, Role.RESEARCHER)
    projects = project_list(user=request.user, roles=(Role.RESEARCHER,))
    source_id = whole_number(request.POST.get("resubmit_of") or request.GET.get("from"))
    source = ended_workload(user=request.user, workload_id=source_id) if source_id is not None else None
    form = WorkloadForm(request.POST or None, projects=projects, initial=source and resubmit_initial(source))
    if request.method == "POST" and form.is_valid():
        try:
            workload = workload_submit(
                user=signed_in(request.user),
                project_id=form.cleaned_data["project"].id,
                spec_data=form.spec_data(),
                resubmit_of=source,
            )
        except DomainError as exc:
            form_refused(form, exc)
        else:
            messages.success(request, f"Submitted {workload.name} ({workload.uid}).")
            return redirect("workload-detail", workload_id=workload.id)
    return render(
        request, "broker/workload_new.html", {"form": form, "quota": _quota_left(request, form), "source": source}
    )


def _quota_left(request: HttpRequest, form: WorkloadForm) -> dict | None:
    projects = cast(ModelChoiceField, form.fields["project"]).queryset  # fields is typed by name only
    assert projects is not None  # the form's __init__ sets it
    chosen = whole_number(str(form["project"].value() or ""))  # an int when the form has an initial
    project = projects.filter(id=chosen).first() if chosen is not None else projects.first()
    if project is None:
        return None
    slug = form["gpu_class"].value()
    classes = (
        GpuClass.objects.filter(slug=slug)
        if slug
        else GpuClass.objects.filter(quotas__tenant_id=project.tenant_id).order_by("slug")
    )
    gpu_class = classes.first()
    if gpu_class is None:
        return None
    use = quota_use(tenant_id=project.tenant_id, gpu_class_id=gpu_class.id)
    return {"gpu_class": gpu_class, "use": use, "tenant": project.tenant}


@login_required
def workload_quota_hint(request: HttpRequest) -> HttpResponse:
    """HTMX: the quota left for the class chosen in the submit form."""
    require_role(request.user, Role.RESEARCHER)
    form = WorkloadForm(request.GET, projects=project_list(user=request.user, roles=(Role.RESEARCHER,)))
    return render(request, "broker/workload_new.html#quota", {"quota": _quota_left(request, form)})


@login_required
def workload_detail(request: HtmxHttpRequest, workload_id: int) -> HttpResponse:
    workload = workload_for(user=request.user, workload_id=workload_id)
    placement = PlacementRecord.from_json(workload.placement)
    reason_text, reason_source = reason_words(workload.state, workload.reason)
    context = {
        "w": workload,
        "plain_reason": reason_text,
        "raw_reason_source": reason_source,
        "ranked": placement.ranked,
        "manager": placement.manager,  # the MultiKueue manager it came from ("" otherwise)
        "excluded": [
            (name, e.rule, RULE_WORDS.get(e.rule, e.rule), e.message) for name, e in sorted(placement.excluded.items())
        ],
        "timeline": workload_timeline(user=request.user, workload_id=workload_id),
        "attempts": workload.attempts.select_related("cluster"),
        "outcome": workload_outcome(workload),
    }
    if not request.htmx:  # the 2 s refresh redraws the status only: no command per refresh
        context["last_lines"] = workload_last_lines(user=request.user, workload=workload)
    return render(request, _partial(request, "broker/workload_detail.html", "status"), context)


@login_required
@require_POST
def workload_cancel_view(request: HttpRequest, workload_id: int) -> HttpResponse:
    workload_for(user=request.user, workload_id=workload_id)  # 403 or 404 first
    workload = workload_cancel(user=signed_in(request.user), workload_id=workload_id)
    messages.info(request, f"Cancellation of {workload.name} stored; it is final once the cluster confirms.")
    return redirect("workload-detail", workload_id=workload.id)


@login_required
def quota_list_page(request: HttpRequest) -> HttpResponse:
    require_role(request.user, Role.ADMIN)
    return render(request, "broker/quota_list.html", {"rows": _quota_rows(request)})


def _quota_rows(request: HttpRequest) -> list[dict]:
    rows = []
    for quota in quota_list(user=request.user):
        use = quota_use(tenant_id=quota.tenant_id, gpu_class_id=quota.gpu_class_id)
        rows.append(
            {
                "quota": quota,
                "use": use,
                "form": QuotaForm(
                    initial={"limit_gpus": quota.limit_gpus, "borrow_limit_gpus": quota.borrow_limit_gpus}
                ),
            }
        )
    return rows


@login_required
@require_POST
def quota_edit(request: HtmxHttpRequest, quota_id: int) -> HttpResponse:
    quota = quota_for(user=request.user, quota_id=quota_id)
    form = QuotaForm(request.POST)
    error = ""
    if form.is_valid():
        try:
            quota = quota_set(
                actor=signed_in(request.user),
                tenant_id=quota.tenant_id,
                gpu_class_id=quota.gpu_class_id,
                limit_gpus=form.cleaned_data["limit_gpus"],
                borrow_limit_gpus=form.cleaned_data["borrow_limit_gpus"],
            )
        except DomainError as exc:
            form_refused(form, exc)
    error = "; ".join(f"{k}: {' '.join(map(str, v))}" for k, v in form.errors.items())
    use = quota_use(tenant_id=quota.tenant_id, gpu_class_id=quota.gpu_class_id)
    row = {
        "quota": quota,
        "use": use,
        "form": form
        if error
        else QuotaForm(initial={"limit_gpus": quota.limit_gpus, "borrow_limit_gpus": quota.borrow_limit_gpus}),
        "error": error,
    }
    if request.htmx:
        return render(request, "broker/quota_list.html#row", {"row": row}, status=422 if error else 200)
    if error:
        messages.error(request, error)
    return redirect("quota-list")


@login_required
def cluster_list_page(request: HttpRequest) -> HttpResponse:

    rows = overview_selectors.cluster_rows(user=request.user)
    # operators get the demo's outage switch on simulated clusters: None (no switch), True (cut off)
    outages = simulated_outages() if is_operator(request.user) else {}
    for row in rows:
        row["outage"] = outages.get(row["cluster"].name) if row["cluster"].kind == "simulator" else None
    return render(request, "broker/cluster_list.html", {"clusters": rows, "policy": policy_in_force()})


@login_required
def reservation_list_page(request: HttpRequest) -> HttpResponse:
    require_role(request.user, Role.ADMIN)
    return render(request, "broker/reservation_list.html", {"reservations": reservation_list(user=request.user)[:500]})


@login_required
def escalation_list_page(request: HttpRequest) -> HttpResponse:
    require_role(request.user, Role.ADMIN)
    show_all = request.GET.get("all") == "1"
    return render(
        request,
        "broker/escalation_list.html",
        {
            "escalations": escalation_list(user=request.user, include_resolved=show_all)[:500],
            "show_all": show_all,
            "form": EscalationResolveForm(),
        },
    )


@login_required
@require_POST
def escalation_action(request: HttpRequest, escalation_id: int, action: str) -> HttpResponse:
    escalation_for(user=request.user, escalation_id=escalation_id)  # 403 or 404 first
    if action not in ("acknowledge", "resolve"):
        raise Http404("unknown action")
    if action == "acknowledge":
        escalation_acknowledge(user=signed_in(request.user), escalation_id=escalation_id)
    else:
        form = EscalationResolveForm(request.POST)
        if not form.is_valid():
            messages.error(request, "outcome: say what was found and done.")
            return redirect("escalation-list")
        escalation_resolve(
            user=signed_in(request.user),
            escalation_id=escalation_id,
            outcome=form.cleaned_data["outcome"],
            old_run_dead=form.cleaned_data["old_run_dead"],
        )
    return redirect("escalation-list")


@login_required
def fleet_page(request: HtmxHttpRequest) -> HttpResponse:
    context = overview_selectors.overview(user=request.user)
    if not request.htmx:  # the 5 s refresh swaps the figures only; the charts draw once per page
        context.update(
            chart_data=fleet_charts(user=request.user),
            sample_interval_s=settings.GPUBROKER_SAMPLE_INTERVAL_S,
            estimator=overview_selectors.estimator_overview(
                user=request.user, live=context["figures"]["wait_estimate_report"]
            ),
        )
    return render(request, _partial(request, "broker/fleet.html", "figures"), context)
