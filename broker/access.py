"""The broker's objects as the pages and the API reach them: each helper returns the object
or refuses, deciding 403 before 404 through ``portal.tenancy.access.object_for``.

The selectors stay the reads (what a user may see); these only add who is told "no" (403)
and who is told "not found" (404), so a page and its API endpoint cannot disagree."""

from __future__ import annotations

from typing import Literal

from broker.models import Escalation, Quota, QuotaRequest, Workload
from broker.selectors.quota_requests import quota_request_list
from broker.selectors.workloads import WORKLOAD_ROLES, escalation_list, quota_list, workload_list
from portal.tenancy.access import AnyUser, object_for, projects_for
from portal.tenancy.models import Role

WorkloadNeed = Literal["view", "logs", "resubmit"]

_WORKLOAD_TENANT = "project__tenant_id"


def workload_for(*, user: AnyUser, workload_id: int, need: WorkloadNeed = "view") -> Workload:
    """view (and cancel): the project's researchers, the tenant's admins, operators; logs: the
    project's researchers and the tenant's admins (members, not operators: it is their output);
    resubmit: the project's researchers."""
    if need == "view":
        return object_for(
            user, workload_list(user=user), workload_id, tenant_field=_WORKLOAD_TENANT, roles=WORKLOAD_ROLES
        )
    if need == "logs":
        mine = Workload.objects.filter(project__in=projects_for(user, *WORKLOAD_ROLES)).select_related("cluster")
        return object_for(user, mine, workload_id, tenant_field=_WORKLOAD_TENANT, roles=WORKLOAD_ROLES)
    researcher = workload_list(user=user).filter(project__in=projects_for(user, Role.RESEARCHER))
    return object_for(user, researcher, workload_id, tenant_field=_WORKLOAD_TENANT, roles=(Role.RESEARCHER,))


def quota_for(*, user: AnyUser, quota_id: int) -> Quota:
    """The tenant's admins and operators edit a quota (its limit, its owner)."""
    return object_for(user, quota_list(user=user), quota_id, tenant_field="tenant_id", roles=(Role.ADMIN,))


def escalation_for(*, user: AnyUser, escalation_id: int) -> Escalation:
    """The tenant's admins (an escalation attributed to their tenant) and operators (all)."""
    visible = escalation_list(user=user, include_resolved=True)
    return object_for(user, visible, escalation_id, tenant_field="tenant_id", roles=(Role.ADMIN,))


def quota_request_for(*, user: AnyUser, quota_request_id: int) -> QuotaRequest:
    """The requester, the quota's owner, the tenant's admins and operators; any role may ask."""
    visible = quota_request_list(user=user)
    return object_for(user, visible, quota_request_id, tenant_field="quota__tenant_id")
