from django.urls import path

from accounting import views

urlpatterns = [
    path("", views.accounting_index, name="accounting-index"),
    path("usage/", views.usage_mine, name="usage-mine"),
    path("chargeback/", views.chargeback, name="chargeback"),
    path("chargeback/export/", views.chargeback_export, name="chargeback-export"),
    path("bills/", views.bill_list, name="bill-list"),
    path("bills/<int:bill_id>/", views.bill_detail, name="bill-detail"),
    path("reconciliation/", views.reconciliation, name="reconciliation"),
    path("rates/", views.rate_list, name="rate-list"),
]
