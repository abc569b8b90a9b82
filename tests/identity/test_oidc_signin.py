"""Sign-in through the institution against a real OpenID Connect provider on loopback:
discovery, authorization code with PKCE, RS256 ID token checked against the JWKS,
userinfo with groups.  Groups map to tenant roles; a group removed at the provider
removes the role at the next sign-in; a forged or expired ID token is refused."""
from __future__ import annotations

import time
from urllib.parse import parse_qs, urlparse

import jwt
import pytest
import requests
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth import get_user_model

from broker.models import AuditRecord
from portal.identity.models import ClaimRule
from portal.tenancy.models import Membership, Role
from tests.factories import PASSWORD, ProjectFactory, TenantFactory, UserFactory
from tests.identity.conftest import CLIENT_ID, CLIENT_SECRET

pytestmark = pytest.mark.django_db


@pytest.fixture
def oidc(settings, provider):
    found = provider.discovery
    settings.GPUBROKER_OIDC_ISSUER = found["issuer"]
    settings.OIDC_RP_CLIENT_ID, settings.OIDC_RP_CLIENT_SECRET = CLIENT_ID, CLIENT_SECRET
    settings.OIDC_OP_AUTHORIZATION_ENDPOINT = found["authorization_endpoint"]
    settings.OIDC_OP_TOKEN_ENDPOINT = found["token_endpoint"]
    settings.OIDC_OP_USER_ENDPOINT = found["userinfo_endpoint"]
    settings.OIDC_OP_JWKS_ENDPOINT = found["jwks_uri"]
    settings.AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.ModelBackend",
                                        "portal.identity.backend.InstitutionBackend"]
    assert "S256" in found.get("code_challenge_methods_supported", ["S256"])
    return provider


@pytest.fixture
def rules():
    physics, biology = TenantFactory(slug="physics"), TenantFactory(slug="biology")
    ProjectFactory(tenant=physics, slug="lattice")
    ClaimRule.objects.create(claim="groups", value="physics-gpu", tenant=physics, role=Role.RESEARCHER)
    ClaimRule.objects.create(claim="groups", value="biology-admins", tenant=biology, role=Role.ADMIN)
    return physics, biology


def _sign_in(client, provider, username: str):
    """The browser's part, by hand: the portal sends us to the provider, we sign in
    there, the provider sends us back with a code, the portal exchanges it."""
    start = client.get("/oidc/authenticate/")
    assert start.status_code == 302
    authorize = start["Location"]
    query = parse_qs(urlparse(authorize).query)
    assert query["code_challenge_method"] == ["S256"] and query["code_challenge"][0]
    browser = requests.Session()
    login = browser.get(authorize, timeout=10)            # redirected to the provider's login form
    assert "/accounts/login/" in login.url
    token = browser.cookies["csrftoken"]
    back = browser.post(login.url, data={"username": username, "password": f"{username}-pw",
                                         "csrfmiddlewaretoken": token,
                                         "next": parse_qs(urlparse(login.url).query)["next"][0]},
                        headers={"Referer": login.url}, allow_redirects=False, timeout=10)
    back = browser.get(back.headers["Location"] if back.headers["Location"].startswith("http")
                       else provider.url + back.headers["Location"], allow_redirects=False, timeout=10)
    callback = back.headers["Location"]
    assert callback.startswith("http://testserver/oidc/callback/?"), callback
    return client.get(callback.replace("http://testserver", ""))


def _roles(username: str) -> set[tuple[str, str]]:
    return set(Membership.objects.filter(user__username=username).values_list("tenant__slug", "role"))


def test_first_sign_in_provisions_the_user_with_the_roles_of_their_groups(client, oidc, rules):
    oidc.call("set_groups", "carol", "physics-gpu", "biology-admins", "unrelated")
    response = _sign_in(client, oidc, "carol")
    assert response.status_code == 302 and response["Location"] == "/"
    assert _roles("carol") == {("physics", Role.RESEARCHER), ("biology", Role.ADMIN)}
    user = get_user_model().objects.get(username="carol")
    assert user.email == "carol@uni.example" and not user.has_usable_password()
    assert client.get("/").status_code == 200
    assert AuditRecord.objects.filter(action="auth.signin", actor=user, inputs__method="oidc").exists()


def test_a_group_removed_at_the_provider_removes_the_role_at_the_next_sign_in(client, oidc, rules):
    oidc.call("set_groups", "dave", "physics-gpu", "biology-admins")
    _sign_in(client, oidc, "dave")
    dave = get_user_model().objects.get(username="dave")
    Membership.objects.create(user=dave, tenant=rules[0], role=Role.FINANCE)  # given by hand: stays
    oidc.call("set_groups", "dave", "physics-gpu")
    client.logout()
    _sign_in(client, oidc, "dave")
    assert _roles("dave") == {("physics", Role.RESEARCHER), ("physics", Role.FINANCE)}
    assert AuditRecord.objects.filter(action="auth.role_removed", actor=dave).count() == 1


def test_local_accounts_still_sign_in_beside_the_provider(client, oidc):
    UserFactory(username="breakglass", is_staff=True)
    assert client.post("/login/", {"username": "breakglass", "password": PASSWORD}).status_code == 302
    client.logout()
    assert 'id="oidc-signin"' in client.get("/login/").content.decode()


def _backend():
    from portal.identity.backend import InstitutionBackend
    return InstitutionBackend()


def _claims(issuer: str, **extra) -> dict:
    now = int(time.time())
    return {"iss": issuer, "aud": CLIENT_ID, "sub": "1", "iat": now, "exp": now + 300, "nonce": "n", **extra}


def _provider_key(provider):
    import sqlite3
    with sqlite3.connect(provider.db) as db:
        return db.execute("select key from oidc_provider_rsakey").fetchone()[0]


def test_an_id_token_signed_by_another_key_is_refused(oidc):
    from django.core.exceptions import SuspiciousOperation

    kid = _published_kid(oidc)
    forger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    forged = jwt.encode(_claims(oidc.discovery["issuer"]), forger, algorithm="RS256", headers={"kid": kid})
    with pytest.raises(SuspiciousOperation, match="ID token refused"):
        _backend().verify_token(forged, nonce="n")


def test_an_expired_id_token_from_the_provider_key_is_refused(oidc):
    from django.core.exceptions import SuspiciousOperation

    key = _provider_key(oidc)
    kid = _published_kid(oidc)
    past = int(time.time()) - 3600
    expired = jwt.encode(_claims(oidc.discovery["issuer"], iat=past - 600, exp=past), key, algorithm="RS256",
                         headers={"kid": kid})
    with pytest.raises(SuspiciousOperation, match="expired"):
        _backend().verify_token(expired, nonce="n")
    fresh = jwt.encode(_claims(oidc.discovery["issuer"]), key, algorithm="RS256", headers={"kid": kid})
    assert _backend().verify_token(fresh, nonce="n")["sub"] == "1"  # the same key, in date: accepted


def _published_kid(provider) -> str:
    """The id of the provider's signing key, as its JWKS publishes it."""
    return requests.get(provider.discovery["jwks_uri"], timeout=10).json()["keys"][0]["kid"]


def test_the_callback_refuses_a_forged_state_without_signing_in(client, oidc):
    response = client.get("/oidc/callback/?code=abc&state=forged")
    assert response.status_code in (302, 400)
    assert "_auth_user_id" not in client.session


def test_oidc_discover_prints_the_endpoints_of_the_provider(oidc, capsys):
    from django.core.management import call_command

    call_command("oidc_discover", oidc.discovery["issuer"])
    out = capsys.readouterr().out
    assert f"GPUBROKER_OIDC_JWKS_ENDPOINT={oidc.discovery['jwks_uri']}" in out
    assert f"GPUBROKER_OIDC_ISSUER={oidc.discovery['issuer']}" in out
