"""broker.access: each helper returns the object, or decides 403 before 404 the one way."""
from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied
from django.http import Http404

from broker.access import escalation_for, quota_for, quota_request_for, workload_for
from broker.models import Escalation
from portal.tenancy.models import Role
from tests.factories import ClusterFactory, MembershipFactory, ProjectFactory, UserFactory, WorkloadFactory

MISSING = 10**9


def _answer(helper, **kwargs) -> object:
    try:
        return helper(**kwargs)
    except PermissionDenied:
        return 403
    except Http404:
        return 404


@pytest.fixture
def workload(trio):
    return WorkloadFactory(project=trio.project, submitted_by=trio.member)


def test_workload_for_returns_it_to_its_people_and_refuses_the_others_by_membership(trio, workload):
    elsewhere = UserFactory(username="elsewhere")  # a researcher of another project of the same tenant
    MembershipFactory(user=elsewhere, tenant=trio.tenant, project=ProjectFactory(tenant=trio.tenant),
                      role=Role.RESEARCHER)
    operator = UserFactory(username="operator", is_staff=True)
    expected = {trio.member: workload, trio.owner: workload, operator: workload,
                elsewhere: 403, trio.finance: 403, trio.outsider: 404}
    for user, answer in expected.items():
        assert _answer(workload_for, user=user, workload_id=workload.id) == answer, user.username
    # an id that does not exist: the outsider and the member with the role alike hear "not found";
    # a role that never reaches workloads hears "no" whatever the id, so nothing is learnt either way
    assert _answer(workload_for, user=trio.outsider, workload_id=MISSING) == 404
    assert _answer(workload_for, user=trio.member, workload_id=MISSING) == 404
    assert _answer(workload_for, user=trio.finance, workload_id=MISSING) == 403


def test_workload_logs_and_resubmit_needs_are_narrower_than_view(trio, workload):
    operator = UserFactory(username="operator", is_staff=True)
    assert _answer(workload_for, user=operator, workload_id=workload.id, need="logs") == 404  # not their output
    assert _answer(workload_for, user=trio.owner, workload_id=workload.id, need="logs") == workload
    assert _answer(workload_for, user=trio.owner, workload_id=workload.id, need="resubmit") == 403
    assert _answer(workload_for, user=trio.member, workload_id=workload.id, need="resubmit") == workload
    assert _answer(workload_for, user=trio.outsider, workload_id=workload.id, need="resubmit") == 404


def test_quota_and_escalation_for_admins_only_outsider_404(trio, quota):
    escalation = Escalation.objects.create(kind="orphan_job", key="k", cluster=ClusterFactory(), tenant=trio.tenant)
    for helper, kwargs in ((quota_for, {"quota_id": quota.id}), (escalation_for, {"escalation_id": escalation.id})):
        answers = [_answer(helper, user=u, **kwargs) for u in (trio.owner, trio.member, trio.finance, trio.outsider)]
        assert answers[1:] == [403, 403, 404] and answers[0] in (quota, escalation), helper.__name__


def test_quota_request_for_the_requester_and_admins_members_403_outsider_404(trio, quota_request):
    colleague = UserFactory(username="colleague")
    MembershipFactory(user=colleague, tenant=trio.tenant, role=Role.RESEARCHER)
    answers = {u.username: _answer(quota_request_for, user=u, quota_request_id=quota_request.id)
               for u in (trio.member, trio.owner, colleague, trio.finance, trio.outsider)}
    assert answers == {"member": quota_request, "owner": quota_request, "colleague": 403, "money": 403,
                       "outsider": 404}
