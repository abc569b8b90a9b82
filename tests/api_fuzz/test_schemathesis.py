"""Fuzz the REST API v1 from its own OpenAPI schema (schemathesis, in-process over WSGI).

For every operation of /api/v1/schema/, schemathesis generates valid and invalid requests
and checks each response: never a server error, and every documented response matches
its schema (status, content type, body, headers).  The caller holds every role in
tenant A and authenticates with an API token, so each operation gets past
authorisation and into its real code.

The served schema documents every answer, errors included (400/401/403/404 in the one
error shape, by portal.restapi.schema).  ``documented_errors`` adds only what no API view
answers: Django's HTML 404 for a path that matches no URL (an id that is not a number).

CI runs 30 examples per operation, derandomised (the same cases every run); a deeper
search: ``GPUBROKER_FUZZ_EXAMPLES=500 GPUBROKER_FUZZ_RANDOM=1 pytest tests/api_fuzz``.
"""
from __future__ import annotations

import copy
import json
import os

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, settings

SCHEMA_URL = "/api/v1/schema/"


def documented_errors(raw: dict) -> dict:
    out = copy.deepcopy(raw)
    for item in out["paths"].values():
        for method, op in item.items():
            if method in ("get", "post", "put", "patch", "delete"):
                op["responses"]["404"].setdefault("content", {})["text/html"] = {"schema": {"type": "string"}}
    return out


def _served_schema() -> dict:
    from django.test import Client

    response = Client().get(SCHEMA_URL, HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200, response.content[:500]
    return json.loads(response.content)


schema = schemathesis.openapi.from_dict(documented_errors(_served_schema()))
schema.app = get_wsgi_application()
schema.location = SCHEMA_URL


@pytest.fixture
def world(trio, db):
    """Tenant A with a quota, a cluster, a queued workload and an escalation to find."""
    from decimal import Decimal

    from broker.backends.sim import NodeGroup, SimulatorFleet
    from broker.models import Cluster, Escalation, Quota
    from broker.services.fleet.registration import gpu_classes_from_policy
    from broker.services.fleet.inventory import cluster_sync_inventory
    from broker.services.following.reconcile import reconcile_fleet
    from portal.apitokens.services.tokens import token_create
    from portal.tenancy.models import Membership, Role

    classes = {c.slug: c for c in gpu_classes_from_policy()}
    Quota.objects.create(tenant=trio.tenant, gpu_class=classes["a100-80gb"], limit_gpus=16)
    SimulatorFleet.instance().add_cluster("onprem", "slurm", node_groups=[NodeGroup(
        count=2, gpu_model="A100", gpu_memory_gb=80, gpus_per_node=8, name_prefix="onprem-")])
    cluster = Cluster.objects.create(name="onprem", kind="simulator", region="eu-west", location="onprem",
                                     price_per_gpu_hour=Decimal("1.2"), config={"image_pull_s": 0})
    cluster_sync_inventory(cluster_id=cluster.id)
    for role in (Role.ADMIN, Role.FINANCE):
        Membership.objects.get_or_create(user=trio.member, tenant=trio.tenant, role=role)
    SimulatorFleet.instance().get("onprem").inject_foreign_job(gpus_per_worker=1, workload_id="wl-lost")
    reconcile_fleet()
    Escalation.objects.update(tenant=trio.tenant)
    secret = token_create(actor=trio.member, name="fuzz", expires_in_days=1).secret
    return {"Authorization": f"Bearer {secret}"}


# Two checks are left out, for what this API is rather than for what it does wrong:
# * ignored_auth sends the generated (invalid) session cookie *beside* the valid bearer
#   token given here, and the API rightly accepts the request; that authorisation is
#   enforced is tests/security/test_authorisation_matrix.py's job, URL by URL;
# * positive_data_acceptance expects every schema-valid body to be accepted, but a workload
#   spec is also checked against things no schema holds (the project must be one of yours,
#   the GPU class must exist, a gang must fit the limits of broker/spec.py): those are 400s.
EXCLUDED = [schemathesis.checks.ignored_auth, schemathesis.checks.positive_data_acceptance]


@schema.parametrize()
@settings(max_examples=int(os.environ.get("GPUBROKER_FUZZ_EXAMPLES", "30")), deadline=None,
          derandomize=not os.environ.get("GPUBROKER_FUZZ_RANDOM"),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.filter_too_much, HealthCheck.data_too_large])
@pytest.mark.django_db
def test_api_answers_every_generated_request_without_server_error_and_within_its_schema(case, world):
    case.call_and_validate(headers=world, excluded_checks=EXCLUDED)
