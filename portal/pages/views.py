"""Pages shared by every role: the home page and a liveness check."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from portal.pages.selectors import home_summary


@login_required
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "portal/home.html", {"summary": home_summary(user=request.user)})


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"ok": True})
