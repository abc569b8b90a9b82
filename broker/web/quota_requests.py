"""Quota request pages: ask (researchers), follow (the requester), decide (the quota's owner)."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from broker.models import GpuClass, QuotaRequestState
from broker.access import quota_request_for
from broker.selectors.quota_requests import can_decide, quota_request_list, quota_request_trail
from broker.services.quota.requests import quota_request_create, quota_request_decide
from portal.tenancy.refusals import form_refused
from portal.tenancy.access import require_role, roles_of, signed_in
from portal.tenancy.errors import DomainError
from portal.tenancy.models import Project, Role
from portal.tenancy.selectors import project_list


class QuotaRequestForm(forms.Form):
    project: forms.ModelChoiceField[Project] = forms.ModelChoiceField(queryset=None, empty_label=None)
    gpu_class = forms.ModelChoiceField(queryset=GpuClass.objects.all(), to_field_name="slug", empty_label=None)
    extra_gpus = forms.IntegerField(min_value=1, max_value=1_000_000, label="More GPUs")
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}))
    ends_on = forms.DateField(label="Until (inclusive)", widget=forms.DateInput(attrs={"type": "date"}))

    def __init__(self, *args, projects, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["project"].queryset = projects


class DecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("refuse", "Refuse")])
    note = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))


@login_required
def quota_request_list_page(request: HttpRequest) -> HttpResponse:
    """The requests the user may see, and (for researchers) the form to ask for more."""
    researcher = Role.RESEARCHER in roles_of(request.user)
    if request.method == "POST":
        require_role(request.user, Role.RESEARCHER)
    form = QuotaRequestForm(
        request.POST or None,
        initial=request.GET.dict() or None,
        projects=project_list(user=request.user, roles=(Role.RESEARCHER,)),
    )
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            made = quota_request_create(
                user=signed_in(request.user),
                project_id=data["project"].id,
                gpu_class=data["gpu_class"].slug,
                extra_gpus=data["extra_gpus"],
                reason=data["reason"],
                ends_on=data["ends_on"],
            )
        except DomainError as exc:
            form_refused(form, exc)
        else:
            messages.success(request, "Request sent to the quota's owner.")
            return redirect("quota-request-detail", quota_request_id=made.id)
    return render(
        request,
        "broker/quota_request_list.html",
        {"requests": quota_request_list(user=request.user)[:200], "form": form if researcher else None},
        status=400 if form.errors else 200,
    )


@login_required
def quota_request_detail(
    request: HttpRequest, quota_request_id: int, form: DecisionForm | None = None, status: int = 200
) -> HttpResponse:
    item = quota_request_for(user=request.user, quota_request_id=quota_request_id)
    decider = (
        item.state == QuotaRequestState.PENDING
        and item.requester_id != request.user.pk
        and can_decide(user=request.user, request=item)
    )
    return render(
        request,
        "broker/quota_request_detail.html",
        {
            "item": item,
            "trail": quota_request_trail(request=item),
            "form": (form or DecisionForm()) if decider else None,
        },
        status=status,
    )


@login_required
@require_POST
def quota_request_decide_view(request: HttpRequest, quota_request_id: int) -> HttpResponse:
    quota_request_for(user=request.user, quota_request_id=quota_request_id)  # 403 or 404 first
    form = DecisionForm(request.POST)
    if not form.is_valid():
        return quota_request_detail(request, quota_request_id, form=form, status=400)
    try:
        quota_request_decide(
            user=signed_in(request.user),
            request_id=quota_request_id,
            approve=form.cleaned_data["decision"] == "approve",
            note=form.cleaned_data["note"],
        )
    except DomainError as exc:
        if exc.status == 403:  # deciding one's own request: who, not what; no form to correct
            messages.error(request, str(exc))
            return quota_request_detail(request, quota_request_id, status=403)
        form_refused(form, exc)
        return quota_request_detail(request, quota_request_id, form=form, status=400)
    return redirect("quota-request-detail", quota_request_id=quota_request_id)
