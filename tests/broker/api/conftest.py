"""Fixtures for the REST API tests: a JSON client per user, and objects in tenant A."""
from __future__ import annotations

import json

import pytest
from django.test import Client

from broker.models import Escalation, Quota
from tests.factories import PASSWORD


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
def cluster(make_cluster):
    return make_cluster("onprem")


@pytest.fixture
def placed(cluster, submit, drive):
    """A 2 x 2-GPU workload of tenant A, queued on the 'onprem' cluster."""
    return drive(submit(gpus_per_worker=2, workers=2))


@pytest.fixture
def escalation(trio, cluster, sim) -> Escalation:
    """An orphan job on 'onprem', attributed to tenant A."""
    from broker.services.following.reconcile import reconcile_fleet

    sim.get("onprem").inject_foreign_job(gpus_per_worker=2)
    reconcile_fleet()
    esc = Escalation.objects.get()
    Escalation.objects.filter(id=esc.id).update(tenant=trio.tenant)
    esc.refresh_from_db()
    return esc


@pytest.fixture
def quota_a(quota) -> Quota:
    return quota
