from django.urls import path

from demo import views

urlpatterns = [
    path("clusters/<int:cluster_id>/outage/", views.cluster_outage, name="cluster-outage"),
]
