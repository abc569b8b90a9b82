"""The OpenAPI schema: valid OpenAPI 3, generated without a single spectacular warning,
and it describes what the API really answers."""
from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse


@pytest.fixture
def schema():
    from drf_spectacular.drainage import GENERATOR_STATS
    from drf_spectacular.generators import SchemaGenerator

    GENERATOR_STATS.reset()
    with GENERATOR_STATS.silence():
        generated = SchemaGenerator().get_schema(request=None, public=True)
    warnings, errors = dict(GENERATOR_STATS._warn_cache), dict(GENERATOR_STATS._error_cache)
    GENERATOR_STATS.reset()
    assert not errors, f"drf-spectacular errors: {list(errors)}"
    assert not warnings, f"drf-spectacular warnings: {list(warnings)}"
    return generated


def test_schema_validates_as_openapi_3(schema):
    from drf_spectacular.validation import validate_schema

    assert schema["openapi"].startswith("3.")
    validate_schema(schema)  # raises on any violation of the OpenAPI 3 JSON schema


def test_schema_documents_every_api_route(schema):
    from config.urls import api_v1 as urlpatterns

    documented = set(schema["paths"])
    for pattern in urlpatterns:
        route = "/api/v1/" + str(pattern.pattern).replace("<int:", "{").replace(">", "}")
        assert route in documented, route


def test_schema_operation_ids_are_unique(schema):
    ids = [op["operationId"] for path in schema["paths"].values() for op in path.values()
           if isinstance(op, dict) and "operationId" in op]
    assert len(ids) == len(set(ids))


def test_schema_states_the_real_status_codes_and_shapes(schema):
    paths = schema["paths"]
    create = paths["/api/v1/workloads/"]["post"]
    assert "201" in create["responses"]
    body = create["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    assert {"project", "name", "command"} <= set(schema["components"]["schemas"][body]["required"])
    assert "202" in paths["/api/v1/workloads/{workload_id}/cancel/"]["post"]["responses"]
    assert "patch" in paths["/api/v1/quotas/{quota_id}/"]
    assert any(p["name"] == "state" for p in paths["/api/v1/workloads/"]["get"].get("parameters", []))
    quota = schema["components"]["schemas"]["QuotaOut"]["properties"]
    assert quota["used_gpus"]["type"] == "integer"


def test_schema_endpoint_serves_the_same_valid_schema(client, db):
    from drf_spectacular.validation import validate_schema

    response = client.get(reverse("api-schema"), {"format": "json"})
    assert response.status_code == 200
    served = json.loads(response.content)
    validate_schema(served)
    assert "/api/v1/workloads/" in served["paths"]


def test_schema_endpoint_serves_yaml_by_default(client, db):
    response = client.get(reverse("api-schema"))
    assert response.status_code == 200 and b"openapi: 3." in response.content


def test_api_docs_page_is_served_with_its_own_files_and_nothing_from_another_host(client, db):
    response = client.get(reverse("api-docs"))
    assert response.status_code == 200
    page = response.content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert assets and not [a for a in assets if "//" in a]  # no CDN: isolated sites see a blank page
    for asset in assets:
        served = client.get(asset)
        assert served.status_code == 200, asset
        b"".join(served.streaming_content if served.streaming else [served.content])  # read and close
