"""A request that meets an unreachable database is told to try again (503), not given a 500."""
from __future__ import annotations

from unittest import mock

from django.db import OperationalError
from django.urls import reverse


GONE = OperationalError("server closed the connection unexpectedly")


def test_the_api_answers_503_with_retry_after_in_its_error_shape_while_the_database_is_down(trio, api):
    client = api(trio.member)
    with mock.patch("broker.api.views.workload_list", side_effect=GONE):
        r = client.get("/api/v1/workloads/")
    assert r.status_code == 503 and r["Retry-After"] == "5"
    assert r.json()["error"]["code"] == "database_unavailable"
    assert "Try again" in r.json()["error"]["message"]


def test_a_page_answers_503_with_a_page_that_needs_no_database(trio, login):
    client = login(trio.member)
    with mock.patch("portal.pages.views.home_summary", side_effect=GONE):
        r = client.get(reverse("home"))
    assert r.status_code == 503 and r["Retry-After"] == "5"
    assert b"Try again shortly" in r.content and b"nothing was changed" in r.content


def test_other_errors_stay_server_errors(trio, api):
    client = api(trio.member)
    client.client.raise_request_exception = False
    with mock.patch("broker.api.views.workload_list", side_effect=RuntimeError("a bug")):
        assert client.get("/api/v1/workloads/").status_code == 500

