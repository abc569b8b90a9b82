"""The broker's API: workloads, quotas, quota requests, clusters, reservations, escalations,
notification preferences, and the caller.  Tokens, accounting and identity serve theirs
beside their apps; config/urls.py mounts them all under /api/v1/."""

from django.urls import path

from broker.api import (
    views,
    views_account,
    views_admin,
    views_logs,
    views_notifications,
    views_preview,
    views_quota_requests,
)

urlpatterns = [
    path("me/", views_account.Me.as_view(), name="api-me"),
    path("projects/", views_account.ProjectList.as_view(), name="api-projects"),
    path("workloads/", views.WorkloadListCreate.as_view(), name="api-workloads"),
    path("workloads/preview/", views_preview.WorkloadPreview.as_view(), name="api-workload-preview"),
    path("workloads/<int:workload_id>/", views.WorkloadDetail.as_view(), name="api-workload"),
    path("workloads/<int:workload_id>/timeline/", views.WorkloadTimeline.as_view(), name="api-workload-timeline"),
    path("workloads/<int:workload_id>/attempts/", views.WorkloadAttempts.as_view(), name="api-workload-attempts"),
    path("workloads/<int:workload_id>/explain/", views.WorkloadExplain.as_view(), name="api-workload-explain"),
    path("workloads/<int:workload_id>/cancel/", views.WorkloadCancel.as_view(), name="api-workload-cancel"),
    path("workloads/<int:workload_id>/logs/", views_logs.WorkloadLogs.as_view(), name="api-workload-logs"),
    path("quotas/", views_admin.QuotaList.as_view(), name="api-quotas"),
    path("quotas/<int:quota_id>/", views_admin.QuotaDetail.as_view(), name="api-quota"),
    path("quota-requests/", views_quota_requests.QuotaRequestListCreate.as_view(), name="api-quota-requests"),
    path(
        "quota-requests/<int:quota_request_id>/",
        views_quota_requests.QuotaRequestDetail.as_view(),
        name="api-quota-request",
    ),
    path(
        "quota-requests/<int:quota_request_id>/decision/",
        views_quota_requests.QuotaRequestDecision.as_view(),
        name="api-quota-request-decision",
    ),
    path(
        "notifications/preferences/",
        views_notifications.NotificationPreferences.as_view(),
        name="api-notification-preferences",
    ),
    path("clusters/", views_admin.ClusterList.as_view(), name="api-clusters"),
    path("clusters/<int:cluster_id>/", views_admin.ClusterDetail.as_view(), name="api-cluster"),
    path("reservations/", views_admin.ReservationList.as_view(), name="api-reservations"),
    path("escalations/", views_admin.EscalationList.as_view(), name="api-escalations"),
    path(
        "escalations/<int:escalation_id>/acknowledge/",
        views_admin.EscalationAcknowledge.as_view(),
        name="api-escalation-ack",
    ),
    path(
        "escalations/<int:escalation_id>/resolve/",
        views_admin.EscalationResolve.as_view(),
        name="api-escalation-resolve",
    ),
]
