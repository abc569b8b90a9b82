"""/account/tokens/: a user creates a token (the secret on that one answer), sees it listed
by its prefix only, and revokes it; nobody else's tokens are reachable."""
from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from portal.apitokens.models import ApiToken
from portal.apitokens.services.tokens import token_create


def _secret(html: str) -> str:
    match = re.search(r'<code id="token-secret">(gpb_[^<]+)</code>', html)
    assert match, html
    return match.group(1)


def test_page_creates_a_token_and_shows_its_secret_once(trio, login):
    client = login(trio.member)
    response = client.post(reverse("account-tokens"), {"name": "laptop", "expires_in_days": 30})
    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    secret = _secret(response.content.decode())
    again = client.get(reverse("account-tokens")).content.decode()
    assert secret not in again and "laptop" in again and secret[:10] in again
    api = Client(HTTP_AUTHORIZATION=f"Bearer {secret}").get(reverse("api-me"))
    assert api.status_code == 200 and api.json()["username"] == trio.member.username


@pytest.mark.parametrize("data, field", [({"name": "x", "expires_in_days": 0}, "expires_in_days"),
                                         ({"name": "x", "expires_in_days": 2**64}, "expires_in_days"),
                                         ({"name": "", "expires_in_days": 3}, "name")])
def test_bad_input_is_400_naming_the_field_and_creates_nothing(trio, login, data, field):
    response = login(trio.member).post(reverse("account-tokens"), data)
    assert response.status_code == 400 and f'data-field="{field}"' in response.content.decode()
    assert not ApiToken.objects.exists()


def test_user_revokes_own_token_from_the_page(trio, login):
    new = token_create(actor=trio.member, name="old", expires_in_days=5)
    response = login(trio.member).post(reverse("account-token-revoke", args=[new.token.id]))
    assert response.status_code == 302
    assert Client(HTTP_AUTHORIZATION=f"Bearer {new.secret}").get(reverse("api-me")).status_code == 401
    assert "revoked" in login(trio.member).get(reverse("account-tokens")).content.decode()


@pytest.mark.parametrize("who", ["outsider", "owner", "finance"])
def test_another_users_token_is_404_and_not_listed(trio, login, who):
    new = token_create(actor=trio.member, name="members-token", expires_in_days=5)
    client = login(getattr(trio, who))
    assert client.post(reverse("account-token-revoke", args=[new.token.id])).status_code == 404
    assert "members-token" not in client.get(reverse("account-tokens")).content.decode()
    new.token.refresh_from_db()
    assert new.token.revoked_at is None


def test_anonymous_is_sent_to_log_in(db):
    response = Client().get(reverse("account-tokens"))
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_navigation_links_the_token_page(trio, login):
    assert reverse("account-tokens") in login(trio.member).get(reverse("home")).content.decode()


def test_operator_revokes_a_token_in_the_django_admin(trio, db):
    from tests.factories import PASSWORD, UserFactory

    new = token_create(actor=trio.member, name="leaked", expires_in_days=5)
    operator = UserFactory(username="op", is_staff=True, is_superuser=True)
    client = Client()
    assert client.login(username=operator.username, password=PASSWORD)
    response = client.post(reverse("admin:apitokens_apitoken_changelist"),
                           {"action": "revoke", "_selected_action": [new.token.id]})
    assert response.status_code == 302
    new.token.refresh_from_db()
    assert new.token.revoked_by == operator
