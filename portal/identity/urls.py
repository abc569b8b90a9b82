from django.urls import path

from portal.identity import views

urlpatterns = [
    path("authenticate/", views.oidc_start, name="oidc_authentication_init"),
    path("callback/", views.oidc_callback, name="oidc_authentication_callback"),
]
