"""REST API, admin side: quotas, clusters, reservations, escalations.  Wrong role: 403;
outsider: 404 (or nothing of the other tenant in a list)."""
from __future__ import annotations

import pytest
from django.urls import reverse

from broker.models import AuditRecord, Quota


def _rows(response) -> list[dict]:
    body = response.json()
    return body["results"] if isinstance(body, dict) and "results" in body else body


# --- reservations --------------------------------------------------------------------

def test_admin_lists_the_live_reservations_as_the_page_shows_them(trio, placed, api):
    rows = _rows(api(trio.owner).get(reverse("api-reservations")))
    assert [(r["tenant"], r["gpu_class"], r["gpus"], r["state"]) for r in rows] == [("physics", "a100-80gb", 4, "confirmed")]
    assert rows[0]["workload"].startswith("wl-") and rows[0]["expires_at"]


@pytest.mark.parametrize("who", ["member", "finance"])
def test_wrong_role_gets_403_on_reservations(trio, placed, api, who):
    response = api(getattr(trio, who)).get(reverse("api-reservations"))
    assert response.status_code == 403 and response.json()["error"]["code"] == "permission_denied"


def test_outsider_admin_sees_none_of_another_tenants_reservations(trio, placed, api):
    assert _rows(api(trio.outsider).get(reverse("api-reservations"))) == []


def test_reservations_come_in_keyset_pages(trio, placed, api):
    body = api(trio.owner).get(reverse("api-reservations"), limit=1).json()
    assert len(body["results"]) == 1 and "next" in body


# --- quotas --------------------------------------------------------------------------

def test_admin_lists_the_tenants_quotas_with_use(trio, placed, api):
    rows = _rows(api(trio.owner).get(reverse("api-quotas")))
    assert [(r["tenant"], r["gpu_class"], r["limit_gpus"], r["used_gpus"]) for r in rows] == [
        ("physics", "a100-80gb", 64, 4)]


def test_admin_reads_one_quota(trio, quota, api):
    body = api(trio.owner).get(reverse("api-quota", args=[quota.id])).json()
    assert body["id"] == quota.id and body["limit_gpus"] == 64 and body["used_gpus"] == 0


def test_admin_patches_a_quota(trio, placed, api):
    quota = Quota.objects.get(tenant=trio.tenant)
    response = api(trio.owner).patch(reverse("api-quota", args=[quota.id]), {"limit_gpus": 40, "borrow_limit_gpus": 4})
    assert response.status_code == 200, response.content
    assert (response.json()["limit_gpus"], response.json()["borrow_limit_gpus"]) == (40, 4)
    quota.refresh_from_db()
    assert (quota.limit_gpus, quota.borrow_limit_gpus) == (40, 4)


def test_patch_below_current_use_is_400_with_the_numbers(trio, placed, api):
    quota = Quota.objects.get(tenant=trio.tenant)
    response = api(trio.owner).patch(reverse("api-quota", args=[quota.id]), {"limit_gpus": 3})
    assert response.status_code == 400
    message = " ".join(response.json()["error"]["fields"]["limit_gpus"])
    assert "3 GPUs" in message and "4 GPUs already reserved or running" in message
    quota.refresh_from_db()
    assert quota.limit_gpus == 64


def test_patch_to_exactly_current_use_is_allowed(trio, placed, api):
    quota = Quota.objects.get(tenant=trio.tenant)
    response = api(trio.owner).patch(reverse("api-quota", args=[quota.id]), {"limit_gpus": 4})
    assert response.status_code == 200 and response.json()["limit_gpus"] == 4


@pytest.mark.parametrize("data, field", [({"limit_gpus": -1}, "limit_gpus"), ({}, "limit_gpus"),
                                         ({"limit_gpus": 8, "borrow_limit_gpus": -2}, "borrow_limit_gpus")])
def test_patch_with_bad_numbers_is_400_naming_the_field(trio, quota, api, data, field):
    response = api(trio.owner).patch(reverse("api-quota", args=[quota.id]), data)
    assert response.status_code == 400 and field in response.json()["error"]["fields"]


@pytest.mark.parametrize("who", ["member", "finance"])
def test_wrong_role_gets_403_on_quotas(trio, quota, api, who):
    client = api(getattr(trio, who))
    assert client.get(reverse("api-quotas")).status_code == 403
    assert client.get(reverse("api-quota", args=[quota.id])).status_code == 403
    assert client.patch(reverse("api-quota", args=[quota.id]), {"limit_gpus": 1}).status_code == 403
    quota.refresh_from_db()
    assert quota.limit_gpus == 64


def test_outsider_admin_gets_404_on_another_tenants_quota(trio, quota, api):
    client = api(trio.outsider)
    assert _rows(client.get(reverse("api-quotas"))) == []
    assert client.get(reverse("api-quota", args=[quota.id])).status_code == 404
    assert client.patch(reverse("api-quota", args=[quota.id]), {"limit_gpus": 1}).status_code == 404
    quota.refresh_from_db()
    assert quota.limit_gpus == 64


# --- clusters ------------------------------------------------------------------------

@pytest.mark.parametrize("who", ["member", "owner", "finance", "outsider"])
def test_every_member_sees_the_shared_fleet(trio, cluster, api, who):
    client = api(getattr(trio, who))
    rows = _rows(client.get(reverse("api-clusters")))
    assert [r["name"] for r in rows] == ["onprem"]
    body = client.get(reverse("api-cluster", args=[cluster.id])).json()
    assert body["name"] == "onprem" and body["health"] and body["price_per_gpu_hour"]
    assert sum(p["gpus_total"] for p in body["pools"]) == 16


def test_a_user_of_no_tenant_sees_no_cluster(db, cluster):
    from tests.conftest import JsonClient
    from tests.factories import UserFactory

    client = JsonClient(UserFactory(username="nobody"))
    assert _rows(client.get(reverse("api-clusters"))) == []
    assert client.get(reverse("api-cluster", args=[cluster.id])).status_code == 404


def test_missing_cluster_is_404(trio, cluster, api):
    assert api(trio.member).get(reverse("api-cluster", args=[cluster.id + 1000])).status_code == 404


# --- escalations ---------------------------------------------------------------------

def test_admin_lists_acknowledges_and_resolves_an_escalation(trio, escalation, api):
    client = api(trio.owner)
    rows = _rows(client.get(reverse("api-escalations")))
    assert [(r["id"], r["kind"], r["state"], r["cluster"]) for r in rows] == [
        (escalation.id, escalation.kind, "open", "onprem")]

    response = client.post(reverse("api-escalation-ack", args=[escalation.id]))
    assert response.status_code == 200 and response.json()["state"] == "acknowledged"

    response = client.post(reverse("api-escalation-resolve", args=[escalation.id]),
                           {"outcome": "student test job, killed"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["state"] == "resolved" and body["outcome"] == "student test job, killed" and body["resolved_at"]
    escalation.refresh_from_db()
    assert escalation.resolved_by == trio.owner
    assert AuditRecord.objects.filter(action="escalation.resolved", message="student test job, killed").exists()
    assert _rows(client.get(reverse("api-escalations"))) == []  # resolved ones leave the queue


def test_resolve_without_an_outcome_is_400(trio, escalation, api):
    for data in ({}, {"outcome": ""}, {"outcome": "   "}):
        response = api(trio.owner).post(reverse("api-escalation-resolve", args=[escalation.id]), data)
        assert response.status_code == 400 and "outcome" in response.json()["error"]["fields"], data
    escalation.refresh_from_db()
    assert escalation.state == "open"


def test_acknowledge_is_idempotent(trio, escalation, api):
    client = api(trio.owner)
    client.post(reverse("api-escalation-ack", args=[escalation.id]))
    response = client.post(reverse("api-escalation-ack", args=[escalation.id]))
    assert response.status_code == 200 and response.json()["state"] == "acknowledged"
    assert AuditRecord.objects.filter(action="escalation.acknowledged").count() == 1


@pytest.mark.parametrize("who", ["member", "finance"])
def test_wrong_role_gets_403_on_escalations(trio, escalation, api, who):
    client = api(getattr(trio, who))
    assert client.get(reverse("api-escalations")).status_code == 403
    assert client.post(reverse("api-escalation-ack", args=[escalation.id])).status_code == 403
    assert client.post(reverse("api-escalation-resolve", args=[escalation.id]),
                       {"outcome": "nope"}).status_code == 403
    escalation.refresh_from_db()
    assert escalation.state == "open"


def test_outsider_admin_gets_404_on_another_tenants_escalation(trio, escalation, api):
    client = api(trio.outsider)
    assert _rows(client.get(reverse("api-escalations"))) == []
    assert client.post(reverse("api-escalation-ack", args=[escalation.id])).status_code == 404
    response = client.post(reverse("api-escalation-resolve", args=[escalation.id]), {"outcome": "mine now"})
    assert response.status_code == 404
    escalation.refresh_from_db()
    assert escalation.state == "open" and escalation.outcome == ""


# --- every object endpoint answers the outsider 404 --------------------------------------

def test_outsider_gets_404_on_every_tenant_object_endpoint(trio, placed, escalation, quota_request, api):
    """One sweep over the URL conf, so a new object endpoint cannot forget its scoping."""
    from config.urls import api_v1 as urlpatterns

    from portal.apitokens.services.tokens import token_create

    quota = Quota.objects.get(tenant=trio.tenant)
    token = token_create(actor=trio.member, name="laptop", expires_in_days=30).token
    ids = {"workload_id": placed.id, "quota_id": quota.id, "escalation_id": escalation.id, "token_id": token.id,
           "quota_request_id": quota_request.id, "user_id": trio.member.id, "project_id": trio.project.id}
    client = api(trio.outsider)
    checked = []
    for pattern in urlpatterns:
        kwargs = {k: ids[k] for k in pattern.pattern.converters if k in ids}
        if not pattern.pattern.converters or "cluster_id" in pattern.pattern.converters:
            continue  # lists are scoped (tested above); clusters are shared infrastructure
        url = reverse(pattern.name, kwargs=kwargs)
        view = pattern.callback.view_class
        methods = [m for m in ("get", "post", "patch", "delete") if hasattr(view, m)]
        for method in methods:
            data = {"limit_gpus": 1, "outcome": "x", "decision": "approve", "note": "x"}
            response = getattr(client, method)(url, data) if method not in ("get", "delete") else (
                getattr(client, method)(url))
            assert response.status_code == 404, (method, url, response.status_code)
            checked.append((method, pattern.name))
    assert len(checked) >= 9, checked
    token.refresh_from_db()
    assert token.revoked_at is None
    quota_request.refresh_from_db()
    assert quota_request.state == "pending"
