from django.urls import path

from broker.api import views

urlpatterns = [
    path("workloads/", views.WorkloadListCreate.as_view(), name="api-workloads"),
    path("workloads/<int:workload_id>/", views.WorkloadDetail.as_view(), name="api-workload"),
    path("workloads/<int:workload_id>/timeline/", views.WorkloadTimeline.as_view(), name="api-workload-timeline"),
    path("workloads/<int:workload_id>/cancel/", views.WorkloadCancel.as_view(), name="api-workload-cancel"),
    path("quotas/", views.QuotaList.as_view(), name="api-quotas"),
    path("quotas/<int:quota_id>/", views.QuotaDetail.as_view(), name="api-quota"),
    path("clusters/", views.ClusterList.as_view(), name="api-clusters"),
    path("clusters/<int:cluster_id>/", views.ClusterDetail.as_view(), name="api-cluster"),
    path("escalations/", views.EscalationList.as_view(), name="api-escalations"),
    path("escalations/<int:escalation_id>/acknowledge/", views.EscalationAcknowledge.as_view(),
         name="api-escalation-ack"),
    path("escalations/<int:escalation_id>/resolve/", views.EscalationResolve.as_view(), name="api-escalation-resolve"),
]
