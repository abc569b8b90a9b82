"""The user's own notification settings, their webhook secret, and what was sent to them."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from broker.models.notification import EVENTS
from broker.selectors.notifications import notification_preference_get, notifications_sent
from portal.tenancy.refusals import form_refused
from portal.tenancy.errors import DomainError
from broker.services.notifying.deliveries import (
    LONG_WAIT_MAX_MINUTES,
    SIGNATURE_HEADER,
    preference_set,
    secret_rotate,
)
from portal.tenancy.access import signed_in

EVENT_WORDS = {
    "started": "started",
    "ended": "ended (completed or cancelled)",
    "failed": "failed or rejected",
    "withdrawn": "withdrawn from a destination",
    "preempted": "preempted at its destination (queued or placed again)",
    "long_wait": "waiting longer than the time below",
}


class PreferenceForm(forms.Form):
    events = forms.MultipleChoiceField(
        choices=[(e, EVENT_WORDS[e]) for e in EVENTS], required=False, widget=forms.CheckboxSelectMultiple
    )
    long_wait_minutes = forms.IntegerField(min_value=1, max_value=LONG_WAIT_MAX_MINUTES)
    email = forms.BooleanField(required=False, label="By e-mail")
    webhook_url = forms.URLField(
        required=False, max_length=500, assume_scheme="https", label="Webhook URL (a public http or https address)"
    )


@login_required
def notification_settings(request: HttpRequest) -> HttpResponse:
    pref = notification_preference_get(user=signed_in(request.user))
    if request.method == "POST" and request.POST.get("rotate") == "1":
        secret_rotate(user=signed_in(request.user))
        messages.success(request, "New webhook secret made; the old one signs nothing more.")
        return redirect("notification-settings")
    initial = {
        "events": pref.events,
        "long_wait_minutes": pref.long_wait_minutes,
        "email": pref.email,
        "webhook_url": pref.webhook_url,
    }
    form = PreferenceForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            preference_set(user=signed_in(request.user), **form.cleaned_data)
        except DomainError as exc:
            form_refused(form, exc)
        else:
            messages.success(request, "Notification settings saved.")
            return redirect("notification-settings")
    return render(
        request,
        "broker/notification_settings.html",
        {
            "form": form,
            "pref": pref if pref.pk else None,
            "sent": notifications_sent(user=signed_in(request.user)),
            "header": SIGNATURE_HEADER,
        },
        status=400 if form.errors else 200,
    )
