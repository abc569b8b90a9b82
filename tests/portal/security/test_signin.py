"""Sign-ins and failed sign-ins are audited; failed sign-ins and token creation are
rate-limited per client address (429 with Retry-After; the API's error shape on /api/)."""
from __future__ import annotations

import pytest
from django.core.cache import cache

from broker.models import AuditRecord
from tests.factories import PASSWORD, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_counters(settings, monkeypatch):
    settings.GPUBROKER_SIGNIN_RATE_PER_MINUTE = 3
    # one fixed instant: a slow test machine must not carry the attempts into the next window
    monkeypatch.setattr("portal.security.ratelimit.time.time", lambda: 1_000_000.0)
    cache.clear()
    yield
    cache.clear()


def test_a_sign_in_and_a_failed_one_are_audited_with_the_address(client):
    user = UserFactory(username="ada")
    client.post("/login/", {"username": "ada", "password": "wrong"})
    client.post("/login/", {"username": "ada", "password": PASSWORD})
    failed, ok = AuditRecord.objects.filter(action__startswith="auth.").order_by("id")
    assert (failed.action, failed.inputs["username"], failed.inputs["address"]) == ("auth.signin_failed", "ada", "127.0.0.1")
    assert (ok.action, ok.actor, ok.inputs["method"]) == ("auth.signin", user, "password")


def test_sign_in_attempts_over_the_limit_get_429(client):
    UserFactory(username="ada")
    codes = [client.post("/login/", {"username": "ada", "password": "wrong"}).status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    refused = client.post("/login/", {"username": "ada", "password": PASSWORD})
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    assert client.get("/login/").status_code == 200  # the form itself is never limited


def test_successful_sign_ins_from_one_address_are_not_limited(client):
    UserFactory(username="ada")
    for _ in range(5):  # a lab behind one NAT address, all signing in
        assert client.post("/login/", {"username": "ada", "password": PASSWORD}).status_code == 302
        client.logout()


def test_another_address_is_counted_apart(client):
    for _ in range(3):
        client.post("/login/", {"username": "x", "password": "y"})
    assert client.post("/login/", {"username": "x", "password": "y"}).status_code == 429
    assert client.post("/login/", {"username": "x", "password": "y"}, REMOTE_ADDR="10.0.0.9").status_code == 200


def test_token_creation_over_the_limit_gets_the_api_error_shape(client):
    user = UserFactory(username="ada")
    client.force_login(user)
    codes = [client.post("/api/v1/tokens/", {"name": f"t{i}", "expires_in_days": 30},
                         content_type="application/json").status_code for i in range(4)]
    assert codes[:3] == [201, 201, 201] and codes[3] == 429
    body = client.post("/api/v1/tokens/", {"name": "t9"}, content_type="application/json").json()
    assert body["error"]["code"] == "rate_limited" and "try again" in body["error"]["message"]


def test_revoking_a_token_is_never_held_back_by_the_creation_limit(client):
    """Creations used up the minute's limit: the page and the API still revoke (a leaked token
    must go at once), and creating another is still refused."""
    from portal.apitokens.models import ApiToken  # noqa: PLC0415

    user = UserFactory(username="ada")
    client.force_login(user)
    for i in range(3):
        assert client.post("/api/v1/tokens/", {"name": f"t{i}", "expires_in_days": 30},
                           content_type="application/json").status_code == 201
    first, second, third = ApiToken.objects.filter(user=user).order_by("id")
    assert client.post(f"/account/tokens/{first.id}/revoke/").status_code in (200, 302)
    assert client.delete(f"/api/v1/tokens/{second.id}/").status_code in (200, 204)
    assert client.post(f"/api/v1/tokens/{third.id}/").status_code != 429
    assert client.post("/account/tokens/", {"name": "more", "expires_in_days": 30}).status_code == 429
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.revoked_at is not None and second.revoked_at is not None


def _fail(client, forwarded_for: str, remote: str = "10.89.0.5") -> int:
    return client.post("/login/", {"username": "ada", "password": "wrong"}, REMOTE_ADDR=remote,
                       HTTP_X_FORWARDED_FOR=forwarded_for).status_code


def test_behind_a_trusted_proxy_each_client_is_limited_and_audited_by_its_own_address(client, settings):
    """Every request through the compose stack's proxy comes from the proxy's address: counted
    under it, three people's typos would lock everyone out of signing in for a minute."""
    settings.GPUBROKER_TRUSTED_PROXIES = ["10.0.0.0/8"]
    UserFactory(username="ada")
    assert [_fail(client, "198.51.100.7") for _ in range(4)] == [200, 200, 200, 429]
    assert _fail(client, "203.0.113.9") == 200  # someone else behind the same proxy
    addresses = list(AuditRecord.objects.filter(action="auth.signin_failed").values_list("inputs__address", flat=True))
    assert addresses == ["198.51.100.7"] * 3 + ["203.0.113.9"]


def test_an_address_a_client_put_in_front_of_the_proxys_own_entry_is_not_believed(client, settings):
    settings.GPUBROKER_TRUSTED_PROXIES = ["10.0.0.0/8"]
    UserFactory(username="ada")
    codes = [_fail(client, f"192.0.2.{n}, 198.51.100.7") for n in range(4)]
    assert codes == [200, 200, 200, 429]  # one client, whatever it wrote on the left


def test_forwarded_for_from_an_untrusted_address_is_ignored(client, settings):
    settings.GPUBROKER_TRUSTED_PROXIES = ["10.0.0.0/8"]
    UserFactory(username="ada")
    codes = [_fail(client, f"192.0.2.{n}", remote="198.51.100.50") for n in range(4)]
    assert codes == [200, 200, 200, 429]
    assert set(AuditRecord.objects.filter(action="auth.signin_failed").values_list("inputs__address", flat=True)) == {
        "198.51.100.50"}
