from django.urls import path

from broker.web import logs, notifications, quota_owner, quota_requests, submit_extras, views

urlpatterns = [
    path("workloads/", views.workload_list_page, name="workload-list"),
    path("workloads/new/", views.workload_new, name="workload-new"),
    path("workloads/new/quota/", views.workload_quota_hint, name="workload-quota-hint"),
    path("workloads/new/preview/", submit_extras.workload_preview_view, name="workload-preview"),
    path("workloads/<int:workload_id>/again/", submit_extras.workload_run_again, name="workload-run-again"),
    path("workloads/<int:workload_id>/", views.workload_detail, name="workload-detail"),
    path("workloads/<int:workload_id>/cancel/", views.workload_cancel_view, name="workload-cancel"),
    path("workloads/<int:workload_id>/logs/", logs.workload_logs_page, name="workload-logs"),
    path("quotas/", views.quota_list_page, name="quota-list"),
    path("quotas/<int:quota_id>/", views.quota_edit, name="quota-edit"),
    path("quotas/<int:quota_id>/owner/", quota_owner.quota_owner_edit, name="quota-owner"),
    path("quota-requests/", quota_requests.quota_request_list_page, name="quota-request-list"),
    path("quota-requests/<int:quota_request_id>/", quota_requests.quota_request_detail, name="quota-request-detail"),
    path(
        "quota-requests/<int:quota_request_id>/decide/",
        quota_requests.quota_request_decide_view,
        name="quota-request-decide",
    ),
    path("notifications/", notifications.notification_settings, name="notification-settings"),
    path("clusters/", views.cluster_list_page, name="cluster-list"),
    path("reservations/", views.reservation_list_page, name="reservation-list"),
    path("escalations/", views.escalation_list_page, name="escalation-list"),
    path("escalations/<int:escalation_id>/<str:action>/", views.escalation_action, name="escalation-action"),
    path("fleet/", views.fleet_page, name="fleet"),
]
