"""The clusters page's outage switch (demo): a thin view over demo.outage."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from broker.selectors.workloads import cluster_get
from demo.outage import cluster_outage_set
from portal.tenancy.refusals import redirect_on_refusal

_ALLOWED_FIELDS = {"outage", "csrfmiddlewaretoken"}


class OutageForm(forms.Form):
    outage = forms.ChoiceField(choices=(("start", "start"), ("end", "end")))

    def clean(self):
        unknown = sorted(set(self.data) - _ALLOWED_FIELDS)
        if unknown:
            raise forms.ValidationError(f"unknown field(s): {', '.join(unknown)}")
        return super().clean()


@login_required
@require_POST
@redirect_on_refusal("cluster-list")
def cluster_outage(request: HttpRequest, cluster_id: int) -> HttpResponse:
    cluster = cluster_get(user=request.user, cluster_id=cluster_id)  # 404 for anyone outside every tenant
    form = OutageForm(request.POST)
    if not form.is_valid():
        problems = "; ".join(f"{field}: {' '.join(map(str, errors))}" for field, errors in form.errors.items())
        return HttpResponseBadRequest(problems.replace("__all__: ", ""), content_type="text/plain")
    start = form.cleaned_data["outage"] == "start"
    cluster = cluster_outage_set(actor=request.user, cluster_id=cluster.id, unreachable=start)
    if start:
        messages.warning(
            request,
            f"{cluster.name} is now unreachable (simulated outage): it shows as stale, "
            "keeps its last numbers and takes no new placements.",
        )
    else:
        messages.success(request, f"{cluster.name} is reachable again ({cluster.get_health_display().lower()}).")
    return redirect(reverse("cluster-list") + f"#cluster-{cluster.name}")
