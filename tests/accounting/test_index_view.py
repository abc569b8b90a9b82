"""/accounting/ answers with the accounting pages each role may open."""
from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.factories import UserFactory


def page_links(body: str) -> set[str]:
    block = re.search(r'<ul class="link-cards" id="accounting-pages">.*?</ul>', body, re.S)
    assert block, "no list of accounting pages"
    return set(re.findall(r'data-page="([^"]+)"', block.group(0)))


@pytest.mark.parametrize("who, expected", [
    ("member", {"usage-mine"}),
    ("finance", {"usage-mine", "chargeback", "reconciliation", "bill-list", "rate-list"}),
    ("outsider", {"usage-mine", "chargeback", "reconciliation", "bill-list", "rate-list"}),
    ("owner", {"usage-mine"}),
    ("nobody", set()),
])
def test_accounting_index_answers_with_the_pages_of_the_users_roles(trio, login, who, expected):
    user = UserFactory(username="nobody") if who == "nobody" else getattr(trio, who)
    response = login(user).get("/accounting/")
    assert response.status_code == 200
    body = response.content.decode()
    assert page_links(body) == expected
    assert trio.tenant.name not in body.split("</header>")[1]  # an index of pages, no tenant's figures
    if not expected:
        assert "Your roles open no accounting pages" in body


def test_accounting_index_is_the_named_page_and_in_the_subnav(trio, login):
    assert reverse("accounting-index") == "/accounting/"
    body = login(trio.finance).get(reverse("chargeback")).content.decode()
    assert '<a href="/accounting/">Overview</a>' in body


def test_operators_see_every_finance_page_in_the_index(db, client):
    client.force_login(UserFactory(username="op", is_staff=True))
    body = client.get("/accounting/").content.decode()
    assert page_links(body) == {"usage-mine", "chargeback", "reconciliation", "bill-list", "rate-list"}


def test_anonymous_is_sent_to_log_in_from_the_accounting_index(client, db):
    response = client.get("/accounting/")
    assert response.status_code == 302 and "/login/" in response["Location"]
