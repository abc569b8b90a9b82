"""Shared fixtures: the owner / member / outsider trio, as in healthchecks' tests.

- ``owner``: admin of tenant A (edits its quotas, works its escalations)
- ``member``: researcher in tenant A's project
- ``finance``: finance in tenant A
- ``outsider``: researcher, admin and finance of tenant B: sees nothing of tenant A
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from django.test import Client

from portal.tenancy.models import Project, Role, Tenant
from tests.factories import (
    PASSWORD, MembershipFactory, ProjectFactory, TenantFactory, UserFactory,
)


@dataclass
class Trio:
    tenant: Tenant
    project: Project
    other_tenant: Tenant
    other_project: Project
    owner: object
    member: object
    finance: object
    outsider: object


@pytest.fixture
def trio(db) -> Trio:
    tenant, other = TenantFactory(slug="physics"), TenantFactory(slug="biology")
    project = ProjectFactory(tenant=tenant, slug="lattice", slurm_account="lattice", k8s_namespace="lattice")
    other_project = ProjectFactory(tenant=other, slug="genomes", slurm_account="genomes", k8s_namespace="genomes")
    owner, member, finance, outsider = (UserFactory(username=n) for n in ("owner", "member", "money", "outsider"))
    MembershipFactory(user=owner, tenant=tenant, role=Role.ADMIN)
    MembershipFactory(user=member, tenant=tenant, role=Role.RESEARCHER)
    MembershipFactory(user=finance, tenant=tenant, role=Role.FINANCE)
    for role in Role.values:
        MembershipFactory(user=outsider, tenant=other, role=role)
    return Trio(tenant, project, other, other_project, owner, member, finance, outsider)


class JsonClient:
    """The Django test client, speaking JSON (session auth, as the API's browsers do)."""

    def __init__(self, user) -> None:
        self.client = Client()
        assert self.client.login(username=user.username, password=PASSWORD)

    def get(self, url: str, **params):
        return self.client.get(url, params)

    def post(self, url: str, data: dict | None = None):
        return self.client.post(url, json.dumps(data or {}), content_type="application/json")

    def patch(self, url: str, data: dict):
        return self.client.patch(url, json.dumps(data), content_type="application/json")

    def delete(self, url: str):
        return self.client.delete(url)


@pytest.fixture
def api(trio):
    """api(user) -> a logged-in JSON client."""
    return JsonClient


@pytest.fixture
def login(client):
    def _login(user) -> object:
        assert client.login(username=user.username, password=PASSWORD)
        return client
    return _login


# ---------------------------------------------------------------------------
# Celery: eager by default, so a task runs where the test can see it; the
# ``worker`` marker hands tasks to a real worker process instead.

@pytest.fixture(autouse=True)
def _celery_eager(request):
    from config.celery import app

    eager = "worker" not in request.keywords
    old = app.conf.task_always_eager
    app.conf.task_always_eager = eager
    yield
    app.conf.task_always_eager = old


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    """PBKDF2 at Django's default cost takes about half a second per user a factory makes or
    a client logs in, and proves nothing in these tests: it was a third of the suite's time on
    PostgreSQL.  Processes the tests start keep the production hashers, so the tests that sign
    in through them set their own passwords there."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _no_rate_limit_between_tests(settings):
    """The sign-in/token rate limit counts per address, and every test client is 127.0.0.1:
    a fresh count per test, and a limit the suites' own logins and fuzzing stay under
    (tests/portal/security sets a small one to test the limiter itself)."""
    from django.core.cache import cache

    settings.GPUBROKER_SIGNIN_RATE_PER_MINUTE = 10_000
    cache.clear()
    yield


@pytest.fixture(autouse=True)
def _fresh_simulator():
    """Each test gets an empty simulated fleet on a manual clock."""
    from broker.backends.sim import SimClock, SimulatorFleet

    SimulatorFleet.reset(clock=SimClock())
    yield


# ---------------------------------------------------------------------------
# Markers CI can run must not pass by skipping: GPUBROKER_CI_REQUIRE lists them.

def _required_markers() -> set[str]:
    import os

    return {m.strip() for m in os.environ.get("GPUBROKER_CI_REQUIRE", "").split(",") if m.strip()}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    required = _required_markers() & {m.name for m in item.iter_markers()}
    if report.skipped and required and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid}: skipped, but CI requires markers {sorted(required)} to run "
                           f"(GPUBROKER_CI_REQUIRE): {report.longrepr}")


def pytest_collection_modifyitems(config, items):
    from django.conf import settings

    on_postgres = settings.DATABASES["default"]["ENGINE"].endswith("postgresql")
    for item in items:
        if "postgres" in item.keywords and not on_postgres:
            item.add_marker(pytest.mark.skip(reason="needs PostgreSQL: set DATABASE_URL=postgres://..."))
