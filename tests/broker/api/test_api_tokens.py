"""API tokens: created (secret once, hash only), used as `Authorization: Bearer`, revoked;
an expired or revoked token is a 401 in the one error shape."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from broker.models import AuditRecord
from portal.apitokens.models import ApiToken
from portal.apitokens.services.tokens import hash_secret, token_create


def bearer(secret: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {secret}")


@pytest.fixture
def secret(trio) -> str:
    return token_create(actor=trio.member, name="laptop", expires_in_days=30).secret


def test_created_token_is_shown_once_and_stored_only_as_its_hash(trio, api):
    response = api(trio.member).post(reverse("api-tokens"), {"name": "ci", "expires_in_days": 7})
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["token"].startswith("gpb_") and len(body["token"]) > 40 and body["name"] == "ci"
    token = ApiToken.objects.get(id=body["id"])
    assert token.token_hash == hash_secret(body["token"]) and body["token"] not in str(vars(token))
    assert timedelta(days=6, hours=23) < token.expires_at - timezone.now() <= timedelta(days=7)
    listed = api(trio.member).get(reverse("api-tokens")).json()["results"]
    assert [(t["id"], t["prefix"], t["state"]) for t in listed] == [(token.id, body["token"][:10], "active")]
    assert "token" not in listed[0] and body["token"] not in str(listed)
    assert AuditRecord.objects.filter(action="api_token.created", actor=trio.member).exists()


def test_bearer_token_authenticates_as_its_user(trio, secret):
    response = bearer(secret).get(reverse("api-me"))
    assert response.status_code == 200, response.content
    assert response.json()["username"] == trio.member.username
    assert ApiToken.objects.get().last_used_at is not None


def test_session_and_token_see_the_same_workloads(trio, placed, secret, api):
    by_token = bearer(secret).get(reverse("api-workloads")).json()["results"]
    by_session = api(trio.member).get(reverse("api-workloads")).json()["results"]
    assert [r["id"] for r in by_token] == [r["id"] for r in by_session] == [placed.id]


@pytest.mark.parametrize("change, word", [
    ({"expires_at": timezone.now() - timedelta(seconds=1)}, "expired"),
    ({"revoked_at": timezone.now()}, "revoked"),
])
def test_expired_or_revoked_token_is_401_in_the_error_shape(trio, secret, change, word):
    ApiToken.objects.update(**change)
    response = bearer(secret).get(reverse("api-me"))
    assert response.status_code == 401
    assert response.json()["error"]["code"] == f"token_{word}" and word in response.json()["error"]["message"]
    assert response.json()["error"]["fields"] == {}
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize("header", ["Bearer gpb_not-a-real-token", "Bearer not-ours", "Bearer", "Bearer a b"])
def test_unknown_or_malformed_token_is_401_never_a_session_fallback(trio, header, login):
    client = login(trio.member)  # a valid session beside a bad token must not rescue it
    response = client.get(reverse("api-me"), HTTP_AUTHORIZATION=header)
    assert response.status_code == 401 and response.json()["error"]["code"] == "authentication_failed"


def test_anonymous_call_is_401_naming_the_bearer_scheme(db):
    response = Client().get(reverse("api-me"))
    assert response.status_code == 401 and response.json()["error"]["code"] == "not_authenticated"
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_user_revokes_own_token_and_it_stops_working(trio, secret, api):
    token = ApiToken.objects.get()
    assert api(trio.member).delete(reverse("api-token", args=[token.id])).status_code == 204
    assert bearer(secret).get(reverse("api-me")).status_code == 401
    assert AuditRecord.objects.filter(action="api_token.revoked", actor=trio.member).count() == 1
    assert api(trio.member).delete(reverse("api-token", args=[token.id])).status_code == 204  # harmless twice
    assert AuditRecord.objects.filter(action="api_token.revoked").count() == 1


@pytest.mark.parametrize("who", ["outsider", "owner", "finance"])
def test_another_users_token_is_404_and_stays_valid(trio, secret, api, who):
    token = ApiToken.objects.get()
    assert api(getattr(trio, who)).delete(reverse("api-token", args=[token.id])).status_code == 404
    assert api(getattr(trio, who)).get(reverse("api-tokens")).json()["results"] == []
    assert bearer(secret).get(reverse("api-me")).status_code == 200


def test_operator_revokes_any_users_token(trio, secret):
    from tests.conftest import JsonClient
    from tests.factories import UserFactory

    token = ApiToken.objects.get()
    operator = JsonClient(UserFactory(username="operator", is_staff=True))
    assert operator.delete(reverse("api-token", args=[token.id])).status_code == 204
    token.refresh_from_db()
    assert token.revoked_by.username == "operator"
    assert bearer(secret).get(reverse("api-me")).status_code == 401


@pytest.mark.parametrize("data, field", [
    ({"name": "x", "expires_in_days": 0}, "expires_in_days"),
    ({"name": "x", "expires_in_days": 2**64}, "expires_in_days"),
    ({"expires_in_days": 5}, "name"),
    ({"name": "x", "expires_in": 5}, "expires_in"),
])
def test_bad_token_request_is_400_naming_the_field(trio, api, data, field):
    response = api(trio.member).post(reverse("api-tokens"), data)
    assert response.status_code == 400 and field in response.json()["error"]["fields"], response.content
    assert not ApiToken.objects.exists()


def test_token_may_not_be_created_by_the_anonymous(db):
    response = Client().post(reverse("api-tokens"), {"name": "x"}, content_type="application/json")
    assert response.status_code == 401 and not ApiToken.objects.exists()


def test_every_v1_read_answers_a_token_as_it_answers_the_session(trio, placed, escalation, quota_request, api):
    """One sweep over the URL conf: a bearer token is the same caller as its user's session."""
    from config.urls import api_v1 as urlpatterns
    from broker.models import Quota

    new = token_create(actor=trio.owner, name="sweep", expires_in_days=1)
    quota = Quota.objects.get(tenant=trio.tenant)
    ids = {"workload_id": placed.id, "quota_id": quota.id, "escalation_id": escalation.id,
           "cluster_id": placed.cluster_id, "token_id": new.token.id, "quota_request_id": quota_request.id,
           "user_id": trio.member.id}
    session, token = api(trio.owner), bearer(new.secret)
    checked = []
    for pattern in urlpatterns:
        if not hasattr(pattern.callback.view_class, "get"):
            continue
        url = reverse(pattern.name, kwargs={k: ids[k] for k in pattern.pattern.converters})
        by_session, by_token = session.get(url), token.get(url)
        assert by_session.status_code == by_token.status_code, (url, by_session.status_code, by_token.status_code)
        if by_session.status_code == 200 and pattern.name != "api-tokens":  # last_used_at moves between the two
            assert by_session.content == by_token.content, url
        checked.append(pattern.name)
    assert len(checked) >= 14, checked
