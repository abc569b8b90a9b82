"""Quota request pages: ask, see it, the owner decides; the requester cannot; outsider 404."""
from __future__ import annotations

import pytest
from django.urls import reverse

from broker.models import Quota, QuotaRequest


@pytest.fixture
def form(quota_request_body):
    return quota_request_body


@pytest.fixture
def owned(owned_quota):
    return owned_quota


def test_researcher_asks_and_the_owner_approves_on_the_pages(trio, owned, login, form):
    member = login(trio.member)
    response = member.post(reverse("quota-request-list"), form)
    item = QuotaRequest.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("quota-request-detail", args=[item.id])
    page = member.get(reverse("quota-request-detail", args=[item.id])).content.decode()
    assert 'data-state="pending"' in page and 'data-action="quota_request.created"' in page
    assert 'id="decide-form"' not in page  # the requester gets no decision form
    own = member.post(reverse("quota-request-decide", args=[item.id]), {"decision": "approve"})
    assert own.status_code == 403 and Quota.objects.get(id=owned.id).limit_gpus == 64
    owner = login(trio.owner)
    assert 'id="decide-form"' in owner.get(reverse("quota-request-detail", args=[item.id])).content.decode()
    done = owner.post(reverse("quota-request-decide", args=[item.id]), {"decision": "approve", "note": "ok"})
    assert done.status_code == 302 and Quota.objects.get(id=owned.id).limit_gpus == 72
    page = member.get(reverse("quota-request-detail", args=[item.id])).content.decode()
    assert 'data-state="approved"' in page and 'data-action="quota_request.approved"' in page
    assert 'data-action="quota_request.self_decision_refused"' in page


def test_bad_field_on_the_form_is_named(trio, owned, login, form):
    response = login(trio.member).post(reverse("quota-request-list"), {**form, "ends_on": "2001-01-01"})
    assert response.status_code == 400 and 'data-field="ends_on"' in response.content.decode()
    assert not QuotaRequest.objects.exists()


def test_refusing_needs_a_note(trio, owned, login, form):
    login(trio.member).post(reverse("quota-request-list"), form)
    item = QuotaRequest.objects.get()
    response = login(trio.owner).post(reverse("quota-request-decide", args=[item.id]), {"decision": "refuse"})
    assert response.status_code == 400 and 'data-field="note"' in response.content.decode()


def test_outsider_gets_404_and_sees_no_request(trio, owned, login, form):
    login(trio.member).post(reverse("quota-request-list"), form)
    item = QuotaRequest.objects.get()
    outsider = login(trio.outsider)
    assert outsider.get(reverse("quota-request-detail", args=[item.id])).status_code == 404
    assert outsider.post(reverse("quota-request-decide", args=[item.id]), {"decision": "approve"}).status_code == 404
    assert "paper deadline" not in outsider.get(reverse("quota-request-list")).content.decode()
    assert Quota.objects.get(id=owned.id).limit_gpus == 64
