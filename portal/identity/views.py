"""The OpenID Connect endpoints: mozilla-django-oidc's views, or 404 where no provider is set."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.http import Http404, HttpRequest, HttpResponse
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView


def _configured() -> None:
    if not settings.GPUBROKER_OIDC_ISSUER:
        raise Http404("sign-in through an institution is not set up here")


def oidc_start(request: HttpRequest) -> HttpResponse:
    _configured()
    return OIDCAuthenticationRequestView.as_view()(request)


def oidc_callback(request: HttpRequest) -> HttpResponse:
    _configured()
    return OIDCAuthenticationCallbackView.as_view()(request)


class LoginView(auth_views.LoginView):
    """The local sign-in form, with the institution's button when a provider is set."""

    template_name = "portal/login.html"

    def get_context_data(self, **kwargs):
        return {**super().get_context_data(**kwargs), "oidc_enabled": bool(settings.GPUBROKER_OIDC_ISSUER)}
