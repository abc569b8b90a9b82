from django.urls import path

from portal.apitokens import views

urlpatterns = [
    path("tokens/", views.token_page, name="account-tokens"),
    path("tokens/<int:token_id>/revoke/", views.token_revoke_view, name="account-token-revoke"),
]
