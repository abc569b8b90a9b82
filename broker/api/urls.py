from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from broker.api import (
    legacy,
    views,
    views_account,
    views_admin,
    views_logs,
    views_notifications,
    views_preview,
    views_quota_requests,
)
from broker.api import views_identity

urlpatterns = [
    path("me/", views_account.Me.as_view(), name="api-me"),
    path("projects/", views_account.ProjectList.as_view(), name="api-projects"),
    path("projects/<int:project_id>/run-as/", views_identity.ProjectRunAs.as_view(), name="api-project-run-as"),
    path("cluster-identities/", views_identity.ClusterIdentityList.as_view(), name="api-cluster-identities"),
    path(
        "cluster-identities/<int:user_id>/", views_identity.ClusterIdentityDetail.as_view(), name="api-cluster-identity"
    ),
    path("tokens/", views_account.TokenListCreate.as_view(), name="api-tokens"),
    path("tokens/<int:token_id>/", views_account.TokenRevoke.as_view(), name="api-token"),
    path("workloads/", views.WorkloadListCreate.as_view(), name="api-workloads"),
    path("workloads/preview/", views_preview.WorkloadPreview.as_view(), name="api-workload-preview"),
    path("workloads/<int:workload_id>/", views.WorkloadDetail.as_view(), name="api-workload"),
    path("workloads/<int:workload_id>/timeline/", views.WorkloadTimeline.as_view(), name="api-workload-timeline"),
    path("workloads/<int:workload_id>/attempts/", views.WorkloadAttempts.as_view(), name="api-workload-attempts"),
    path("workloads/<int:workload_id>/explain/", views.WorkloadExplain.as_view(), name="api-workload-explain"),
    path("workloads/<int:workload_id>/cancel/", views.WorkloadCancel.as_view(), name="api-workload-cancel"),
    path("workloads/<int:workload_id>/logs/", views_logs.WorkloadLogs.as_view(), name="api-workload-logs"),
    path("usage/", views_account.UsageList.as_view(), name="api-usage"),
    path("chargeback/", views_account.Chargeback.as_view(), name="api-chargeback"),
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
# the schema and its docs page, outside ``urlpatterns`` so that sweeps over the API's
# object endpoints do not take them for one
schema_urlpatterns = [
    path("", legacy.to_docs),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
]
