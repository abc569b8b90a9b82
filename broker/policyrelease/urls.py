from django.urls import path

from broker.policyrelease import views

urlpatterns = [
    path("", views.release_list, name="policy-list"),
    path("new/", views.release_propose, name="policy-propose"),
    path("<int:release_id>/", views.release_detail, name="policy-detail"),
    path("<int:release_id>/<str:action>/", views.release_action, name="policy-action"),
]
