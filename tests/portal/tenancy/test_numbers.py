"""Numbers from requests: ASCII digits only; a superscript or a huge value is no number, and
the pages and the API that read one answer 400 naming the field (or ignore it), never 500."""

from __future__ import annotations

import pytest

from portal.tenancy.numbers import whole_number
from tests.factories import WorkloadFactory


@pytest.mark.parametrize(("raw", "value"), [("0", 0), ("42", 42), ("007", 7), ("9" * 18, 10**18 - 1)])
def test_ascii_digits_are_a_whole_number(raw, value):
    assert whole_number(raw) == value


@pytest.mark.parametrize("raw", ["²", "٣", "1²", "", "-1", "+1", " 1", "1.0", "9" * 19, None, 3])
def test_anything_else_is_no_number(raw):
    assert whole_number(raw) is None


HOSTILE = ["²", "9" * 40, "-1"]


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize("param", ["tail", "offset", "limit", "worker"])
def test_the_logs_api_names_a_bad_number_and_never_answers_500(client, trio, param, value):
    workload = WorkloadFactory(project=trio.project, tenant=trio.tenant, submitted_by=trio.member, state="running")
    client.force_login(trio.member)
    response = client.get(f"/api/v1/workloads/{workload.id}/logs/", {param: value})
    assert response.status_code == 400, response.content
    assert param in response.json()["error"]["fields"]


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize("param", ["tail", "offset", "limit", "worker"])
def test_the_logs_page_says_what_is_wrong_and_never_answers_500(client, trio, param, value):
    workload = WorkloadFactory(project=trio.project, tenant=trio.tenant, submitted_by=trio.member, state="running")
    client.force_login(trio.member)
    response = client.get(f"/workloads/{workload.id}/logs/", {param: value})
    assert response.status_code in (200, 400)
    assert param in response.content.decode()


@pytest.mark.parametrize("value", HOSTILE)
def test_the_submit_form_ignores_a_from_or_project_that_is_no_number(client, trio, value):
    client.force_login(trio.member)
    assert client.get("/workloads/new/", {"from": value}).status_code == 200
    assert client.get("/workloads/new/quota/", {"project": value}).status_code == 200


@pytest.mark.parametrize("value", HOSTILE)
def test_an_api_page_size_that_is_no_number_is_named(client, trio, value):
    client.force_login(trio.member)
    response = client.get("/api/v1/workloads/", {"limit": value})
    assert response.status_code == 400
    assert "limit" in response.json()["error"]["fields"]
