from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path

from broker.api import legacy as api_legacy
from broker.api import urls as api_urls
from portal.identity import views as identity_views
from portal.pages import views as pages

urlpatterns = [
    path("", pages.home, name="home"),
    path("healthz", pages.healthz, name="healthz"),
    path("", include("portal.metrics.urls")),
    path("login/", identity_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("", include("broker.urls")),
    path("", include("demo.urls")),  # the simulated fleet's outage switch
    path("accounting/", include("accounting.urls")),
    path("api/v1/", include(api_urls.urlpatterns + api_urls.schema_urlpatterns)),
    re_path(r"^api/(?!v1(/|$))(?P<rest>.*)$", api_legacy.to_v1),  # the old paths: 308 to v1
    path("account/", include("portal.apitokens.urls")),
    path("policy/", include("broker.policyrelease.urls")),
    path("oidc/", include("portal.identity.urls")),
]
