"""Reads of broker data, always scoped to the acting user (an outsider sees nothing)."""
from __future__ import annotations

import heapq

from django.db import connection
from django.db.models import OuterRef, QuerySet, Subquery
from django.shortcuts import get_object_or_404

from broker.models import AuditRecord, Cluster, Escalation, Quota, Reservation, Workload
from portal.tenancy.access import AnyUser, is_operator, projects_for, tenants_for
from portal.tenancy.models import Role

WORKLOAD_ROLES = (Role.RESEARCHER, Role.ADMIN)
NEWEST_MAX_PROJECTS = 100  # workload_newest: above this, per-project probes stop paying off


def workload_list(*, user: AnyUser, project_id: int | None = None, state: str = "") -> QuerySet[Workload]:
    qs = Workload.objects.filter(project__in=_workload_projects(user)).select_related("project", "cluster", "gpu_class")
    if project_id is not None:
        qs = qs.filter(project_id=project_id)
    if state:
        qs = qs.filter(state=state)
    return qs


def _workload_projects(user: AnyUser):
    return projects_for(user) if is_operator(user) else projects_for(user, *WORKLOAD_ROLES)


def workload_newest(*, user: AnyUser, state: str = "", limit: int = 200) -> QuerySet[Workload]:
    """The ``limit`` newest workloads the user may see (the queue page's rows), newest first.

    The plain ``workload_list(...)[:limit]`` orders every visible workload by creation: over
    several projects the (project, -created_at) index cannot give that order, so PostgreSQL
    reads and sorts all of them (about 120 ms for 50,000).  Instead take the newest ``limit``
    of each project from that index, keep the newest ``limit`` of those and load only them:
    a few index probes, whatever the table's size."""
    project_ids = list(_workload_projects(user).order_by().values_list("id", flat=True))
    if len(project_ids) > NEWEST_MAX_PROJECTS:  # operators over a large estate: one plain query
        return workload_list(user=user, state=state)[:limit]
    filters = {"state": state} if state else {}
    per_project = [Workload.objects.filter(project_id=pid, **filters).order_by("-created_at", "-id")
                   .values_list("created_at", "id")[:limit] for pid in project_ids]
    if not per_project:
        return Workload.objects.none()
    if len(per_project) == 1:
        newest = list(per_project[0])
    elif connection.features.supports_slicing_ordering_in_compound:  # PostgreSQL: one query
        newest = list(per_project[0].union(*per_project[1:], all=True).order_by("-created_at", "-id")[:limit])
    else:  # SQLite: one small query per project, merged here
        newest = heapq.nlargest(limit, (row for part in per_project for row in part))
    ids = [pk for _, pk in newest]
    # the rows show no spec or placement: skip decoding 200 JSON documents per refresh
    return (Workload.objects.filter(id__in=ids).select_related("project", "cluster", "gpu_class")
            .defer("spec", "placement", "tried_clusters").order_by("-created_at", "-id"))


def workload_get(*, user: AnyUser, workload_id: int) -> Workload:
    return get_object_or_404(workload_list(user=user), id=workload_id)


def workload_timeline(*, user: AnyUser, workload_id: int) -> QuerySet[AuditRecord]:
    workload = workload_get(user=user, workload_id=workload_id)
    return AuditRecord.objects.filter(workload=workload).select_related("actor")


def _admin_tenants(user: AnyUser):
    return tenants_for(user) if is_operator(user) else tenants_for(user, Role.ADMIN)


def quota_list(*, user: AnyUser) -> QuerySet[Quota]:
    return Quota.objects.filter(tenant__in=_admin_tenants(user)).select_related("tenant", "gpu_class", "owner")


def quota_get(*, user: AnyUser, quota_id: int) -> Quota:
    return get_object_or_404(quota_list(user=user), id=quota_id)


def reservation_list(*, user: AnyUser, live_only: bool = True) -> QuerySet[Reservation]:
    qs = Reservation.objects.filter(tenant__in=_admin_tenants(user)).select_related(
        "workload", "tenant", "gpu_class", "cluster")
    # the owner of the quota the reservation counts against
    owner = Quota.objects.filter(tenant_id=OuterRef("tenant_id"), gpu_class_id=OuterRef("gpu_class_id"))
    qs = qs.annotate(quota_owner=Subquery(owner.values("owner__username")[:1]))
    return qs.filter(state__in=("active", "confirmed")) if live_only else qs


def escalation_list(*, user: AnyUser, include_resolved: bool = False) -> QuerySet[Escalation]:
    """Operators see every escalation; a tenant admin sees those attributed to their tenants."""
    if is_operator(user):
        qs = Escalation.objects.all()
    else:
        qs = Escalation.objects.filter(tenant__in=tenants_for(user, Role.ADMIN))
    if not include_resolved:
        qs = qs.exclude(state="resolved")
    return qs.select_related("cluster", "tenant", "workload")


def escalation_get(*, user: AnyUser, escalation_id: int) -> Escalation:
    return get_object_or_404(escalation_list(user=user, include_resolved=True), id=escalation_id)


def cluster_list(*, user: AnyUser) -> QuerySet[Cluster]:
    """The fleet itself is shared infrastructure: every member of any tenant may look at it."""
    if not user.is_authenticated or not (is_operator(user) or tenants_for(user).exists()):
        return Cluster.objects.none()
    return Cluster.objects.prefetch_related("pools")


def cluster_get(*, user: AnyUser, cluster_id: int) -> Cluster:
    return get_object_or_404(cluster_list(user=user), id=cluster_id)
