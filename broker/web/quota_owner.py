"""The owner of a quota and the share of it at which they are told: one small form page."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from broker.access import quota_for
from broker.services.quota.owners import owner_candidates, quota_set_owner
from portal.tenancy.refusals import form_refused
from portal.tenancy.access import signed_in
from portal.tenancy.errors import DomainError


class QuotaOwnerForm(forms.Form):
    owner: forms.ModelChoiceField[User] = forms.ModelChoiceField(queryset=None, required=False, empty_label="(nobody)")
    alert_percent = forms.IntegerField(min_value=1, max_value=100, label="Alert at (% of the limit)")

    def __init__(self, *args, candidates, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["owner"].queryset = candidates.order_by("username")


@login_required
def quota_owner_edit(request: HttpRequest, quota_id: int) -> HttpResponse:
    quota = quota_for(user=request.user, quota_id=quota_id)  # the tenant's admins; 403 or 404 first
    form = QuotaOwnerForm(
        request.POST if request.method == "POST" else None,
        candidates=owner_candidates(quota=quota),
        initial={"owner": quota.owner_id, "alert_percent": round(quota.alert_share * 100)},
    )
    if request.method == "POST" and form.is_valid():
        owner = form.cleaned_data["owner"]
        try:
            quota_set_owner(
                actor=signed_in(request.user),
                quota_id=quota.id,
                owner_id=owner.id if owner else None,
                alert_share=form.cleaned_data["alert_percent"] / 100,
            )
        except DomainError as exc:
            form_refused(form, exc)
        else:
            messages.success(request, f"Owner of {quota.tenant.slug}/{quota.gpu_class.slug} saved.")
            return redirect("quota-list")
    status = 400 if form.errors else 200
    return render(request, "broker/quota_owner.html", {"quota": quota, "form": form}, status=status)
