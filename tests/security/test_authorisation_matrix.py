"""The authorisation matrix: every URL of the portal x every role.

Roles: anonymous; a researcher of tenant A; an admin of tenant A; finance of tenant A; an
outsider who holds *every* role in tenant B.  The objects in the URLs (workload, quota,
escalation, bill) all belong to tenant A.

For each URL and role the table says the status of a GET and of a POST (and, where the
API has one, a PATCH).  A refused write must leave nothing behind, and no list or page an
outsider can open may show tenant A's work.  A URL without a row here fails the test: a
new page is not finished until it says who may use it.
"""
from __future__ import annotations

import base64
import json

import pytest
from django.test import Client
from django.urls import URLResolver, get_resolver, reverse

from tests.factories import PASSWORD

ROLES = ("anonymous", "researcher", "admin", "finance", "outsider")

# name: {method: "anonymous researcher admin finance outsider"}.  302 from a page is a
# redirect to the login form for the anonymous, to the result for the others.  403 before
# 404 (portal.tenancy.access.object_for): a member of tenant A without the role is told
# no (403); the outsider, a member of tenant B only, is told nothing exists (404).
MATRIX: dict[str, dict[str, str]] = {
    "home":                   {"get": "302 200 200 200 200"},
    "healthz":                {"get": "200 200 200 200 200"},
    # /metrics: not by role but by Bearer token or client address; the test client is 127.0.0.1
    "metrics":                {"get": "200 200 200 200 200", "post": "405 405 405 405 405"},
    "login":                  {"get": "200 200 200 200 200"},
    "logout":                 {"get": "405 405 405 405 405", "post": "302 302 302 302 302"},
    "workload-list":          {"get": "302 200 200 403 200"},
    "workload-new":           {"get": "302 200 403 403 200", "post": "302 200 403 403 200"},
    "workload-quota-hint":    {"get": "302 200 403 403 200"},
    # the outsider's form names tenant A's project as not theirs (400, nothing stored)
    "workload-preview":       {"get": "302 405 405 405 405", "post": "302 200 403 403 400"},
    # the world's workload is still reserved: only an ended one may run again
    "workload-run-again":     {"get": "302 405 405 405 405", "post": "302 403 403 403 404"},
    "workload-detail":        {"get": "302 200 200 403 404"},
    "workload-cancel":        {"get": "302 405 405 405 405", "post": "302 302 302 403 404"},
    # output: the project's researchers and the tenant's admins only (the workload has not run: a note)
    "workload-logs":          {"get": "302 200 200 403 404", "post": "302 405 405 405 405"},
    "quota-list":             {"get": "302 403 200 403 200"},
    "quota-edit":             {"get": "302 405 405 405 405", "post": "302 403 302 403 404"},
    "quota-owner":            {"get": "302 403 200 403 404", "post": "302 403 400 403 404"},
    "quota-request-list":     {"get": "302 200 200 200 200", "post": "302 302 403 403 400"},
    "quota-request-detail":   {"get": "302 200 200 403 404"},
    # the requester may not decide their own request; the tenant's admin decides an ownerless quota's
    "quota-request-decide":   {"get": "302 405 405 405 405", "post": "302 403 302 403 404"},
    "notification-settings":  {"get": "302 200 200 200 200", "post": "302 302 302 302 302"},
    "cluster-list":           {"get": "302 200 200 200 200"},
    # the demo outage switch: platform operators only (none of these roles is one)
    "cluster-outage":         {"get": "302 405 405 405 405", "post": "302 403 403 403 403"},
    "reservation-list":       {"get": "302 403 200 403 200"},
    "escalation-list":        {"get": "302 403 200 403 200"},
    "escalation-action":      {"get": "302 405 405 405 405", "post": "302 403 302 403 404"},
    "fleet":                  {"get": "302 200 200 200 200"},
    "accounting-index":       {"get": "302 200 200 200 200"},
    "usage-mine":             {"get": "302 200 200 200 200", "post": "302 405 405 405 405"},
    "chargeback":             {"get": "302 403 403 200 200", "post": "302 405 405 405 405"},
    "chargeback-export":      {"get": "302 403 403 200 200", "post": "302 405 405 405 405"},
    "bill-list":              {"get": "302 403 403 200 200", "post": "302 403 403 200 200"},
    "bill-detail":            {"get": "302 403 403 200 404", "post": "302 405 405 405 405"},
    "reconciliation":         {"get": "302 403 403 200 200", "post": "302 403 403 302 302"},
    "rate-list":              {"get": "302 403 403 200 200", "post": "302 403 403 403 403"},
    "api-me":                 {"get": "401 200 200 200 200"},
    "api-projects":           {"get": "401 200 200 200 200"},
    "api-tokens":             {"get": "401 200 200 200 200", "post": "401 201 201 201 201"},
    "api-token":              {"get": "401 405 405 405 405", "delete": "401 204 404 404 404"},
    # who may list workloads: the same roles as the page (finance: 403 on both)
    "api-workloads":          {"get": "401 200 200 403 200", "post": "401 201 403 403 404"},
    "api-workload":           {"get": "401 200 200 403 404", "post": "401 405 405 405 405"},
    "api-workload-preview":   {"get": "401 405 405 405 405", "post": "401 200 403 403 404"},
    "api-workload-timeline":  {"get": "401 200 200 403 404"},
    "api-workload-attempts":  {"get": "401 200 200 403 404"},
    "api-workload-explain":   {"get": "401 200 200 403 404"},
    "api-workload-cancel":    {"get": "401 405 405 405 405", "post": "401 202 202 403 404"},
    "api-workload-logs":      {"get": "401 200 200 403 404", "post": "401 405 405 405 405"},
    "api-usage":              {"get": "401 200 200 200 200"},
    "api-chargeback":         {"get": "401 403 403 200 200"},
    # each caller's own tenants' GPU-hour budgets (an outsider's tenant has none here)
    "api-budgets":            {"get": "401 200 200 200 200", "post": "401 405 405 405 405"},
    "api-quotas":             {"get": "401 403 200 403 200"},
    "api-reservations":       {"get": "401 403 200 403 200"},
    "api-quota":              {"get": "401 403 200 403 404", "patch": "401 403 200 403 404"},
    "api-quota-requests":     {"get": "401 200 200 200 200", "post": "401 201 403 403 404"},
    "api-quota-request":      {"get": "401 200 200 403 404"},
    "api-quota-request-decision": {"get": "401 405 405 405 405", "post": "401 403 200 403 404"},
    # each caller's own preferences: there is no one else's to reach
    "api-notification-preferences": {"get": "401 200 200 200 200", "patch": "401 200 200 200 200"},
    # cluster identities: tenant admins only; tenant A's member is nobody the outsider may see
    "api-cluster-identities": {"get": "401 403 200 403 200"},
    "api-cluster-identity":   {"get": "401 403 200 403 404", "put": "401 403 200 403 404",
                               "delete": "401 403 200 403 404"},
    "api-project-run-as":     {"get": "401 405 405 405 405", "patch": "401 403 200 403 404"},
    "api-clusters":           {"get": "401 200 200 200 200"},
    "api-cluster":            {"get": "401 200 200 200 200"},
    "api-escalations":        {"get": "401 403 200 403 200"},
    "api-escalation-ack":     {"get": "401 405 405 405 405", "post": "401 403 200 403 404"},
    "api-escalation-resolve": {"get": "401 405 405 405 405", "post": "401 403 200 403 404"},
    "api-schema":             {"get": "200 200 200 200 200"},
    "api-docs":               {"get": "200 200 200 200 200"},
    "account-tokens":         {"get": "302 200 200 200 200", "post": "302 200 200 200 200"},
    "account-token-revoke":   {"get": "302 405 405 405 405", "post": "302 302 404 404 404"},
    # OpenID Connect: 404 while no provider is configured (the suite's default)
    "oidc_authentication_init":     {"get": "404 404 404 404 404"},
    "oidc_authentication_callback": {"get": "404 404 404 404 404"},
    # policy releases: platform operators only (none of these roles is one)
    "policy-list":            {"get": "302 404 404 404 404"},
    "policy-propose":         {"get": "302 404 404 404 404", "post": "302 404 404 404 404"},
    "policy-detail":          {"get": "302 404 404 404 404"},
    "policy-action":          {"get": "302 405 405 405 405", "post": "302 404 404 404 404"},
}
# Lists and pages an outsider may open: none may show tenant A's work.
OUTSIDER_BLIND = ("workload-list", "quota-list", "reservation-list", "escalation-list", "usage-mine", "chargeback",
                  "chargeback-export", "bill-list", "api-workloads", "api-quotas", "api-escalations", "fleet",
                  "reconciliation", "workload-new", "api-projects", "api-usage", "api-chargeback", "api-budgets", "api-tokens",
                  "account-tokens", "quota-request-list", "api-quota-requests",
                  "notification-settings", "api-notification-preferences")
SECRET = "tenant-a-secret"


def _url_names() -> list[str]:
    def walk(patterns):
        for p in patterns:
            if isinstance(p, URLResolver):
                if getattr(p, "app_name", "") == "admin":
                    continue          # Django's admin: staff only, Django's own checks
                yield from walk(p.url_patterns)
            elif p.name:
                yield p.name
    return list(dict.fromkeys(walk(get_resolver().url_patterns)))


@pytest.fixture
def world(trio, db):
    """Tenant A's work, one object of each kind in the URLs."""
    from decimal import Decimal

    from accounting.models import BillImport
    from broker.backends.sim import NodeGroup, SimulatorFleet
    from broker.models import Cluster, Escalation, Quota
    from broker.policyrelease.models import PolicyRelease
    from broker.services.fleet.registration import gpu_classes_from_policy
    from broker.services.fleet.inventory import cluster_sync_inventory
    from broker.services.placing.cycle import workload_place
    from broker.services.following.reconcile import reconcile_fleet
    from broker.services.submitting.workloads import workload_submit

    classes = {c.slug: c for c in gpu_classes_from_policy()}
    quota = Quota.objects.create(tenant=trio.tenant, gpu_class=classes["a100-80gb"], limit_gpus=16)
    SimulatorFleet.instance().add_cluster("onprem", "slurm", node_groups=[NodeGroup(
        count=2, gpu_model="A100", gpu_memory_gb=80, gpus_per_node=8, name_prefix="onprem-")])
    cluster = Cluster.objects.create(name="onprem", kind="simulator", region="eu-west", location="onprem",
                                     price_per_gpu_hour=Decimal("1.2"), config={"image_pull_s": 0})
    cluster_sync_inventory(cluster_id=cluster.id)
    workload = workload_submit(user=trio.member, project_id=trio.project.id, spec_data={
        "name": SECRET, "command": "python train.py", "gpu_class": "a100-80gb", "gpus_per_worker": 1,
        "workers": 1})
    workload_place(workload_id=workload.id)        # reserved: a reservation for the admin pages
    SimulatorFleet.instance().get("onprem").inject_foreign_job(name=SECRET, gpus_per_worker=1, workload_id="wl-lost")
    reconcile_fleet()
    escalation = Escalation.objects.get()
    Escalation.objects.filter(id=escalation.id).update(tenant=trio.tenant, key=f"orphan:{SECRET}")
    from portal.apitokens.services.tokens import token_create

    token = token_create(actor=trio.member, name=SECRET, expires_in_days=30).token
    from datetime import timedelta

    from django.utils import timezone

    from broker.services.quota.requests import quota_request_create

    asked = quota_request_create(user=trio.member, project_id=trio.project.id, gpu_class="a100-80gb", extra_gpus=4,
                                 reason=SECRET, ends_on=timezone.now().date() + timedelta(days=3))
    bill = BillImport.objects.create(provider="aws", tenant=trio.tenant, file_name=f"{SECRET}.csv",
                                     sha256="a" * 64)
    return {"workload_id": workload.id, "quota_id": quota.id, "cluster_id": cluster.id,
            "escalation_id": escalation.id, "bill_id": bill.id, "action": "acknowledge", "token_id": token.id,
            "release_id": PolicyRelease.objects.get().id, "quota_request_id": asked.id,
            "user_id": trio.member.id, "project_id": trio.project.id,
            "_workload": workload, "_quota": quota, "_escalation": escalation, "_trio": trio}


def _url(name: str, world: dict) -> str:
    params = get_resolver().reverse_dict.getlist(name)[0][0][0][1]
    return reverse(name, kwargs={k: world[k] for k in params})


def _client(role: str, trio) -> Client:
    client = Client()
    user = {"researcher": trio.member, "admin": trio.owner, "finance": trio.finance,
            "outsider": trio.outsider}.get(role)
    if user is not None:
        assert client.login(username=user.username, password=PASSWORD)
    return client


def _body(name: str, world: dict) -> dict:
    trio = world["_trio"]
    return {
        "api-workloads": {"project": trio.project.id, "name": "one-more", "command": "x", "gpu_class": "a100-80gb",
                          "gpus_per_worker": 1, "workers": 1},
        "api-workload-preview": {"project": trio.project.id, "name": "look", "command": "x",
                                 "gpu_class": "a100-80gb", "gpus_per_worker": 1, "workers": 1},
        "workload-preview": {"project": trio.project.id, "name": "look", "command": "x", "gpu_class": "a100-80gb",
                             "gpus_per_worker": 1, "workers": 1, "cpus_per_worker": 1, "memory_gb_per_worker": 1,
                             "time_limit_minutes": 10, "priority": "normal"},
        "api-quota": {"limit_gpus": 40},
        "api-quota-requests": {"project": trio.project.id, "gpu_class": "a100-80gb", "extra_gpus": 2,
                               "reason": "more", "ends_on": _in_days(3)},
        "quota-request-list": {"project": trio.project.id, "gpu_class": "a100-80gb", "extra_gpus": 2,
                               "reason": "more", "ends_on": _in_days(3)},
        "api-quota-request-decision": {"decision": "refuse", "note": "no"},
        "notification-settings": {"events": ["failed"], "long_wait_minutes": 30},
        "api-notification-preferences": {"events": ["failed"], "long_wait_minutes": 30},
        "quota-request-decide": {"decision": "refuse", "note": "no"},
        "api-escalation-resolve": {"outcome": "checked"},
        "quota-edit": {"limit_gpus": 40, "borrow_limit_gpus": 0},
        "api-tokens": {"name": "cli", "expires_in_days": 30},
        "account-tokens": {"name": "cli", "expires_in_days": 30},
        "cluster-outage": {"outage": "start"},
        "api-cluster-identity": {"posix_user": "gpb-member"},
        "api-project-run-as": {"run_as": "person"},
    }.get(name, {})


def _in_days(days: int) -> str:
    from datetime import timedelta

    from django.utils import timezone

    return (timezone.now().date() + timedelta(days=days)).isoformat()


def _request(client: Client, method: str, url: str, body: dict, api: bool):
    if method == "get":
        return client.get(url)
    if api:
        return getattr(client, method)(url, json.dumps(body), content_type="application/json")
    return getattr(client, method)(url, body)


def _snapshot(world: dict) -> dict:
    """What a refused write must not touch."""
    from broker.models import Escalation, Quota, QuotaRequest, Workload
    from portal.apitokens.models import ApiToken

    return {
        "workloads": Workload.objects.count(),
        "cancelled": Workload.objects.get(id=world["workload_id"]).cancel_requested_at,
        "quota": Quota.objects.get(id=world["quota_id"]).limit_gpus,
        "escalation": Escalation.objects.get(id=world["escalation_id"]).state,
        "quota_requests": list(QuotaRequest.objects.order_by("id").values_list("state", flat=True)),
        "token_revoked": ApiToken.objects.filter(id=world["token_id"], revoked_at__isnull=False).exists(),
    }


def test_every_url_has_a_row():
    missing = sorted(set(_url_names()) - set(MATRIX))
    assert not missing, f"URLs with no authorisation row in {__file__}: {missing}"
    stale = sorted(set(MATRIX) - set(_url_names()))
    assert not stale, f"rows for URLs that no longer exist: {stale}"


@pytest.mark.parametrize("name", sorted(MATRIX))
def test_url_answers_each_role_as_the_matrix_says(name, world):
    trio = world["_trio"]
    url = _url(name, world)
    api = name.startswith("api-")
    # refused roles first, so that what they must not change is still there to check
    for role in ("anonymous", "outsider", "finance", "researcher", "admin"):
        client = _client(role, trio)
        for method, row in MATRIX[name].items():
            expected = dict(zip(ROLES, row.split()))[role]
            before = _snapshot(world)
            response = _request(client, method, url, _body(name, world), api)
            assert str(response.status_code) == expected, (
                f"{method.upper()} {url} as {role}: {response.status_code}, expected {expected}")
            if expected in ("302", "403", "404", "405") and (role in ("anonymous", "outsider", "finance")
                                                             or expected != "302"):
                after = _snapshot(world)
                assert after == before, f"{method.upper()} {url} as {role} was refused, yet {before} -> {after}"
            if role == "outsider" and name in OUTSIDER_BLIND and response.status_code == 200:
                content = response.content.decode(errors="replace")
                assert SECRET not in content and world["_workload"].uid not in content, (
                    f"{method.upper()} {url} shows the outsider tenant A's work")


def test_anonymous_api_calls_with_wrong_basic_credentials_are_refused(world):
    token = base64.b64encode(b"member:not-the-password").decode()
    for name in ("api-workloads", "api-quotas", "api-escalations", "api-clusters"):
        response = Client().get(_url(name, world), HTTP_AUTHORIZATION=f"Basic {token}")
        assert response.status_code in (401, 403), (name, response.status_code)
