from django.urls import path

from portal.metrics import views

urlpatterns = [path("metrics", views.metrics, name="metrics")]
