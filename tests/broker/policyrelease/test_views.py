"""Release pages: operators only (404 for everyone else), a bad policy is a 400 naming line
and field, the proposer's approval is refused with a clear message, the owner's accepted."""
from __future__ import annotations

import pytest
from django.urls import reverse

from broker.policyrelease.models import PolicyRelease, ReleaseState
from broker.services.fleet.policy import current_policy
from tests.broker.policyrelease.test_validation import GOOD
from tests.factories import PASSWORD, UserFactory

pytestmark = pytest.mark.django_db
CLOUDY = GOOD.replace("preset: on-prem-first", "preset: cloud-first")


@pytest.fixture
def ops(client):
    current_policy()
    return UserFactory(username="alice", is_staff=True), UserFactory(username="bob", is_staff=True)


def _login(client, user):
    assert client.login(username=user.username, password=PASSWORD)


def test_outsiders_get_404_on_every_policy_page(client, ops, trio):
    first = PolicyRelease.objects.get()
    _login(client, trio.owner)  # a tenant admin, not a platform operator
    for url in (reverse("policy-list"), reverse("policy-propose"), reverse("policy-detail", args=[first.id])):
        assert client.get(url).status_code == 404
    assert client.post(reverse("policy-action", args=[first.id, "rollback"])).status_code == 404


def test_a_bad_policy_is_a_400_naming_line_and_field_and_nothing_is_stored(client, ops):
    alice, bob = ops
    _login(client, alice)
    text = GOOD.replace("staleness_limit_s: 300", "staleness_limit_s: soon")
    response = client.post(reverse("policy-propose"), {"content": text, "owner": bob.id})
    assert response.status_code == 400
    line = next(i for i, t in enumerate(text.splitlines(), 1) if t.startswith("staleness_limit_s"))
    assert f'data-problem-line="{line}"' in response.content.decode()
    assert 'data-problem-field="staleness_limit_s"' in response.content.decode()
    assert PolicyRelease.objects.count() == 1


def test_preview_shows_the_diff_without_storing(client, ops):
    alice, bob = ops
    _login(client, alice)
    response = client.post(reverse("policy-propose"), {"content": CLOUDY, "owner": bob.id, "preview": "1"})
    assert response.status_code == 200
    assert "<ins>+preset: cloud-first</ins>" in response.content.decode()
    assert PolicyRelease.objects.count() == 1


def test_propose_then_approval_refused_for_proposer_and_accepted_for_owner(client, ops):
    alice, bob = ops
    _login(client, alice)
    response = client.post(reverse("policy-propose"), {"content": CLOUDY, "owner": bob.id, "summary": "cloud"})
    release = PolicyRelease.objects.get(number=2)
    assert response.status_code == 302 and release.state == ReleaseState.PROPOSED
    refused = client.post(reverse("policy-action", args=[release.id, "approve"]))
    assert refused.status_code == 403 and "only its owner (bob) may approve" in refused.content.decode()
    client.logout()
    _login(client, bob)
    assert client.post(reverse("policy-action", args=[release.id, "approve"])).status_code == 302
    assert client.post(reverse("policy-action", args=[release.id, "activate"])).status_code == 302
    assert current_policy().version == PolicyRelease.objects.get(number=2).version
    page = client.get(reverse("policy-list")).content.decode()
    assert "Roll back to v1" in page


def test_an_unknown_action_is_404(client, ops):
    alice, _ = ops
    _login(client, alice)
    assert client.post(reverse("policy-action", args=[PolicyRelease.objects.get().id, "explode"])).status_code == 404
