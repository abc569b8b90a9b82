from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path

from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from accounting import api as accounting_api
from broker.api import urls as broker_api
from portal.apitokens import api as tokens_api
from portal.identity import api as identity_api
from portal.identity import views as identity_views
from portal.restapi import legacy as api_legacy
from portal.pages import views as pages

# API v1: each app's endpoints, served beside the app (the sweeps over every object endpoint
# read this list)
api_v1 = [*broker_api.urlpatterns, *tokens_api.urlpatterns, *accounting_api.urlpatterns, *identity_api.urlpatterns]
# the schema and its docs page, kept out of ``api_v1``: the sweeps must not take them for objects
api_v1_docs = [
    path("", api_legacy.to_docs),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
]

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
    path("api/v1/", include(api_v1 + api_v1_docs)),
    re_path(r"^api/(?!v1(/|$))(?P<rest>.*)$", api_legacy.to_v1),  # the old paths: 308 to v1
    path("account/", include("portal.apitokens.urls")),
    path("policy/", include("broker.policyrelease.urls")),
    path("oidc/", include("portal.identity.urls")),
]
