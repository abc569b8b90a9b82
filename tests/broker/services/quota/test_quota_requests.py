"""Quota requests: asked by a researcher, decided by the quota's owner (never by the
requester), a raise that lasts until its end date, every step in the audit trail."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone as dt_timezone

import pytest
from django.core.exceptions import PermissionDenied
from django.http import Http404

from broker.models import Quota
from broker.selectors.quota_requests import quota_request_trail
from broker.services.quota.requests import (
    OwnRequest, QuotaRequestRefused, quota_request_create, quota_request_decide, quota_requests_end,
)
from portal.tenancy.models import Role
from tests.factories import MembershipFactory, UserFactory

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=dt_timezone.utc)
ENDS = NOW.date() + timedelta(days=3)


@pytest.fixture
def owned(trio, quota) -> Quota:
    quota.owner = trio.owner
    quota.save()
    return quota


def _ask(trio, user=None, **change):
    args = {"user": user or trio.member, "project_id": trio.project.id, "gpu_class": "a100-80gb",
            "extra_gpus": 16, "reason": "deadline for the lattice paper", "ends_on": ENDS, "now": NOW, **change}
    return quota_request_create(**args)


def _limit(quota) -> int:
    return Quota.objects.get(id=quota.id).limit_gpus


def test_request_is_refused_to_its_requester_approved_by_the_owner_and_ends_on_its_date(trio, owned):
    request = _ask(trio)
    with pytest.raises(OwnRequest):
        quota_request_decide(user=trio.member, request_id=request.id, approve=True, note="", now=NOW)
    assert _limit(owned) == 64
    approved = quota_request_decide(user=trio.owner, request_id=request.id, approve=True, note="ok for Q4", now=NOW)
    assert approved.state == "approved" and approved.decided_by == trio.owner and _limit(owned) == 80
    assert quota_requests_end(now=datetime.combine(ENDS, NOW.timetz())) == 0  # the end date itself still counts
    assert _limit(owned) == 80
    assert quota_requests_end(now=NOW + timedelta(days=4)) == 1 and _limit(owned) == 64
    assert quota_requests_end(now=NOW + timedelta(days=5)) == 0 and _limit(owned) == 64  # taken back once
    trail = list(quota_request_trail(request=request))
    assert [r.action for r in trail] == ["quota_request.created", "quota_request.self_decision_refused",
                                         "quota_request.approved", "quota_request.ended"]
    assert [r.actor for r in trail] == [trio.member, trio.member, trio.owner, None]
    assert "raised by 16 to 80" in trail[2].message and "back to 64" in trail[3].message


def test_requester_who_owns_the_quota_still_cannot_approve_their_own_request(trio, quota):
    quota.owner = trio.member
    quota.save()
    request = _ask(trio)
    with pytest.raises(OwnRequest):
        quota_request_decide(user=trio.member, request_id=request.id, approve=True, note="", now=NOW)
    assert _limit(quota) == 64


def test_refusal_needs_a_note_and_leaves_the_limit(trio, owned):
    request = _ask(trio)
    with pytest.raises(QuotaRequestRefused) as no_note:
        quota_request_decide(user=trio.owner, request_id=request.id, approve=False, note=" ", now=NOW)
    assert no_note.value.field == "note"
    refused = quota_request_decide(user=trio.owner, request_id=request.id, approve=False,
                                   note="the cloud budget is spent", now=NOW)
    assert refused.state == "refused" and refused.note == "the cloud budget is spent" and _limit(owned) == 64
    with pytest.raises(QuotaRequestRefused):  # decided once
        quota_request_decide(user=trio.owner, request_id=request.id, approve=True, note="", now=NOW)
    assert [r.action for r in quota_request_trail(request=request)][-1] == "quota_request.refused"


def test_only_the_quotas_owner_decides_when_it_has_one(trio, owned):
    other_admin = UserFactory(username="other-admin")
    MembershipFactory(user=other_admin, tenant=trio.tenant, role=Role.ADMIN)
    request = _ask(trio)
    with pytest.raises(PermissionDenied):
        quota_request_decide(user=other_admin, request_id=request.id, approve=True, note="", now=NOW)
    assert _limit(owned) == 64


def test_a_quota_without_owner_is_decided_by_the_tenants_admin(trio, quota):
    request = _ask(trio)
    quota_request_decide(user=trio.owner, request_id=request.id, approve=True, note="", now=NOW)
    assert _limit(quota) == 80


def test_outsider_can_neither_see_nor_decide_a_request(trio, owned):
    request = _ask(trio)
    with pytest.raises(Http404):
        quota_request_decide(user=trio.outsider, request_id=request.id, approve=True, note="", now=NOW)
    with pytest.raises(Http404):
        _ask(trio, user=trio.outsider)
    assert _limit(owned) == 64


@pytest.mark.parametrize("change, field", [
    ({"gpu_class": "no-such"}, "gpu_class"),
    ({"gpu_class": "h100"}, "gpu_class"),           # a class the tenant has no quota for
    ({"extra_gpus": 0}, "extra_gpus"),
    ({"reason": "  "}, "reason"),
    ({"ends_on": NOW.date() - timedelta(days=1)}, "ends_on"),
    ({"ends_on": NOW.date() + timedelta(days=400)}, "ends_on"),
])
def test_bad_request_names_the_field(trio, owned, change, field):
    with pytest.raises(QuotaRequestRefused) as bad:
        _ask(trio, **change)
    assert bad.value.field == field


def test_the_beat_task_takes_back_raises_past_their_end_date(trio, owned, settings):
    from django.utils import timezone

    from broker import tasks

    assert settings.CELERY_BEAT_SCHEDULE["end-quota-requests"]["task"] == "broker.tasks.end_quota_requests"
    then = timezone.now() - timedelta(days=2)  # asked and approved two days ago, for that day only
    request = _ask(trio, ends_on=then.date(), now=then)
    quota_request_decide(user=trio.owner, request_id=request.id, approve=True, note="", now=then)
    assert _limit(owned) == 80
    tasks.end_quota_requests()  # the task's own clock: today
    request.refresh_from_db()
    assert request.state == "ended" and _limit(owned) == 64
