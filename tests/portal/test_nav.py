"""Each role's navigation links every page it may open, and no page it is refused."""
from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.factories import UserFactory

# every member: their GPU-hours, the fleet, asking for more quota, their notifications
MEMBER = {"usage-mine", "cluster-list", "fleet", "quota-request-list", "notification-settings"}
RESEARCHER = MEMBER | {"workload-new", "workload-list"}
TENANT_ADMIN = MEMBER | {"workload-list", "quota-list", "reservation-list", "escalation-list"}
FINANCE = MEMBER | {"chargeback", "reconciliation", "bill-list", "rate-list"}
OPERATOR_ONLY = {"policy-list"}  # answers 404 to everyone else, as if it did not exist
OPERATOR = TENANT_ADMIN | FINANCE | OPERATOR_ONLY
EVERY_PAGE = RESEARCHER | OPERATOR


def nav_links(body: str) -> list[str]:
    nav = re.search(r'<nav class="primary".*?</nav>', body, re.S)
    assert nav, "the page has no main navigation"
    return re.findall(r'<a href="([^"]+)"', nav.group(0))


@pytest.fixture
def operator(db):
    return UserFactory(username="operator", is_staff=True)


@pytest.mark.parametrize("who, pages", [("member", RESEARCHER), ("owner", TENANT_ADMIN), ("finance", FINANCE),
                                        ("operator", OPERATOR)])
def test_each_roles_navigation_links_exactly_the_pages_it_may_open(trio, operator, login, who, pages):
    user = operator if who == "operator" else getattr(trio, who)
    client = login(user)
    links = nav_links(client.get(reverse("home")).content.decode())
    assert sorted(links) == sorted(reverse(name) for name in pages)
    for name in pages:
        assert client.get(reverse(name)).status_code == 200, name
    for name in EVERY_PAGE - pages:
        refused = 404 if name in OPERATOR_ONLY else 403
        assert client.get(reverse(name)).status_code == refused, f"{who} may open {name} but has no link to it"


def test_researchers_navigation_reaches_clusters_fleet_and_their_gpu_hours(trio, login):
    body = login(trio.member).get(reverse("workload-list")).content.decode()
    links = nav_links(body)
    assert {"/clusters/", "/fleet/", "/accounting/usage/"} <= set(links)


def test_the_current_page_is_marked_in_the_navigation(trio, login):
    body = login(trio.member).get(reverse("workload-new")).content.decode()
    assert re.search(r'<a href="/workloads/new/" aria-current="page">Submit</a>', body)
    assert '<a href="/workloads/" aria-current' not in body  # the longest matching link only


def test_the_outsiders_navigation_shows_nothing_of_the_other_tenant(trio, login):
    body = login(trio.outsider).get(reverse("home")).content.decode()
    assert set(nav_links(body)) == {reverse(name) for name in (OPERATOR - OPERATOR_ONLY) | RESEARCHER}
    assert trio.project.name not in body


def test_anonymous_visitors_get_no_navigation(client, db):
    body = client.get(reverse("login")).content.decode()
    assert '<nav class="primary"' not in body and "site.css" in body
