"""Login, logout and the home page each role sees."""
from __future__ import annotations

from django.urls import reverse

from tests.factories import PASSWORD


def test_login_page_is_served_to_anonymous_users(client, db):
    response = client.get(reverse("login"))
    assert response.status_code == 200 and b"Log in" in response.content


def test_home_redirects_anonymous_users_to_login(client, db):
    response = client.get(reverse("home"))
    assert response.status_code == 302 and reverse("login") in response["Location"]


def test_each_role_sees_what_it_can_do(trio, login):
    for user, expected, absent in (
        (trio.member, "Submit a job", "Chargeback"),
        (trio.owner, "Escalations", "Submit a job"),
        (trio.finance, "Chargeback", "Escalations"),
    ):
        client = login(user)
        body = client.get(reverse("home")).content.decode()
        assert expected in body and absent not in body, user.username
        client.logout()


def test_home_lists_only_the_users_own_projects(trio, login):
    body = login(trio.member).get(reverse("home")).content.decode()
    assert trio.project.name in body and trio.other_project.name not in body


def test_base_page_sends_csrf_header_with_htmx_requests(trio, login):
    body = login(trio.member).get(reverse("home")).content.decode()
    assert "htmx.min.js" in body and 'hx-headers=\'{"X-CSRFToken"' in body


def test_login_and_logout(client, trio):
    response = client.post(reverse("login"), {"username": "member", "password": PASSWORD})
    assert response.status_code == 302
    assert client.post(reverse("logout")).status_code == 302
    assert client.get(reverse("home")).status_code == 302


def test_a_refused_page_says_which_role_it_needs_inside_the_portal(trio, login):
    response = login(trio.finance).get(reverse("workload-new"))
    body = response.content.decode()
    assert response.status_code == 403
    assert "needs the researcher role" in body and "Your roles and what you can do" in body
    assert "GPU broker" in body and "Log out" in body  # the portal's own page, signed in


def test_a_missing_page_is_the_portals_own_and_names_nothing(trio, login, settings):
    settings.DEBUG = False
    response = login(trio.member).get("/no-such-page/")
    body = response.content.decode()
    assert response.status_code == 404 and "There is nothing here that you can see." in body
    assert "Log out" in body
