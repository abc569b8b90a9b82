"""REST API: quota requests asked, decided by the owner (not the requester), visible to the
requester with their trail; field-named 400s; the outsider gets 404."""
from __future__ import annotations

import pytest
from django.urls import reverse

from broker.models import Quota, QuotaRequest


@pytest.fixture
def body(quota_request_body):
    return quota_request_body


@pytest.fixture
def owned(owned_quota):
    return owned_quota


def test_requester_asks_the_owner_decides_and_the_requester_sees_the_trail(trio, owned, api, body):
    asked = api(trio.member).post(reverse("api-quota-requests"), body)
    assert asked.status_code == 201, asked.content
    item = asked.json()
    assert item["state"] == "pending" and item["owner"] == "owner" and item["requester"] == "member"
    url = reverse("api-quota-request-decision", args=[item["id"]])
    own = api(trio.member).post(url, {"decision": "approve"})
    assert own.status_code == 403 and own.json()["error"]["code"] == "permission_denied"
    assert "someone else who owns the quota decides it" in own.json()["error"]["message"]  # as the page says
    decided = api(trio.owner).post(url, {"decision": "approve", "note": "fine"})
    assert decided.status_code == 200 and decided.json()["limit_gpus"] == 72
    seen = api(trio.member).get(reverse("api-quota-request", args=[item["id"]])).json()
    assert seen["state"] == "approved" and seen["decided_by"] == "owner" and seen["note"] == "fine"
    assert [s["action"] for s in seen["trail"]] == [
        "quota_request.created", "quota_request.self_decision_refused", "quota_request.approved"]
    listed = api(trio.member).get(reverse("api-quota-requests")).json()
    assert [r["id"] for r in listed["results"]] == [item["id"]]


@pytest.mark.parametrize("change, field", [
    ({"gpu_class": "no-such"}, "gpu_class"),
    ({"extra_gpus": 0}, "extra_gpus"),
    ({"extra_gpus": "8"}, "extra_gpus"),
    ({"ends_on": "2001-01-01"}, "ends_on"),
    ({"ends_on": "next week"}, "ends_on"),
    ({"reason": ""}, "reason"),
    ({"extra_gpu": 8}, "extra_gpu"),
])
def test_bad_field_is_a_400_naming_it(trio, owned, api, body, change, field):
    response = api(trio.member).post(reverse("api-quota-requests"), {**body, **change})
    assert response.status_code == 400 and field in response.json()["error"]["fields"], response.content
    assert not QuotaRequest.objects.exists()


def test_refusal_without_a_note_is_a_400_naming_note(trio, owned, api, body):
    item = api(trio.member).post(reverse("api-quota-requests"), body).json()
    response = api(trio.owner).post(reverse("api-quota-request-decision", args=[item["id"]]), {"decision": "refuse"})
    assert response.status_code == 400 and "note" in response.json()["error"]["fields"]
    assert Quota.objects.get(id=owned.id).limit_gpus == 64


def test_outsider_gets_404_for_a_request_and_its_decision_and_sees_none(trio, owned, api, body):
    item = api(trio.member).post(reverse("api-quota-requests"), body).json()
    client = api(trio.outsider)
    assert client.get(reverse("api-quota-request", args=[item["id"]])).status_code == 404
    decided = client.post(reverse("api-quota-request-decision", args=[item["id"]]), {"decision": "approve"})
    assert decided.status_code == 404 and Quota.objects.get(id=owned.id).limit_gpus == 64
    assert client.get(reverse("api-quota-requests")).json()["results"] == []
    assert client.post(reverse("api-quota-requests"), body).status_code == 404


def test_a_bad_field_gets_the_same_400_as_in_a_submission(trio, owned, api, body):
    """The same error shape and the same words as POST /workloads/ for the same mistake."""
    client = api(trio.member)
    spec = {"project": trio.project.id, "name": "x", "command": "x", "gpu_class": "a100-80gb", "gpus_per_worker": 1,
            "workers": 1}
    for request_change, spec_change in (({"colour": "blue"}, {"colour": "blue"}),
                                        ({"extra_gpus": "8"}, {"workers": "8"})):
        asked = client.post(reverse("api-quota-requests"), {**body, **request_change})
        submitted = client.post(reverse("api-workloads"), {**spec, **spec_change})
        assert asked.status_code == submitted.status_code == 400
        (asked_field, asked_words), = asked.json()["error"]["fields"].items()
        (submitted_field, submitted_words), = submitted.json()["error"]["fields"].items()
        assert asked_words == submitted_words and asked_field == next(iter(request_change))
        assert asked.json()["error"]["code"] == submitted.json()["error"]["code"] == "invalid"
        assert asked.json()["error"]["message"] == f"Invalid input: {asked_field}."
    assert not QuotaRequest.objects.exists()
