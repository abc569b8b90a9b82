"""No 5xx for any number in a query string, on any page or any API (issue 30): every numeric
query parameter the OpenAPI schema declares, and every query name the pages read (found in
the code: ``GET.get("name")``, the query parsers, the forms bound to the query string), fed a
Unicode digit, a huge number and a negative one, on every route the URL conf has."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from drf_spectacular.generators import SchemaGenerator

from accounting.forms import ChargebackFilterForm, MonthForm
from broker.web import queue
from broker.web.forms import WorkloadForm
from broker import workload_logs
from tests.factories import WorkloadFactory

HOSTILE = ["²", "9" * 40, "-1"]
ROOT = Path(__file__).resolve().parents[2]
VIEW_CODE = ["broker/web", "broker/api", "accounting", "portal", "demo"]


def schema_numbers() -> list[tuple[str, str]]:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return sorted(
        (path, p["name"])
        for path, ops in schema["paths"].items()
        for p in (ops.get("get") or {}).get("parameters", [])
        if p["in"] == "query" and (p.get("schema") or {}).get("type") in ("integer", "number")
    )


def _get_keys(source: str) -> set[str]:
    """String keys of ``x.GET.get("k")``, ``x.query_params.get("k")``, ``params.get("k")`` and
    of a helper handed the query with the key (``_count(params, "tail", ...)``)."""
    keys = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and any(isinstance(a, ast.Name) and a.id in ("params", "query")
                                              for a in node.args):
            keys |= {a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            owner = ast.unparse(node.func.value)
            if owner.endswith((".GET", ".query_params", "params", "query")):
                keys.add(node.args[0].value)
    return keys


def page_query_names() -> set[str]:
    names: set[str] = set()
    for where in VIEW_CODE:
        for path in (ROOT / where).rglob("*.py"):
            names |= _get_keys(path.read_text())
    for module in (queue, workload_logs):
        names |= _get_keys(inspect.getsource(module))
    for form in (WorkloadForm, MonthForm, ChargebackFilterForm):
        names |= set(form.base_fields)
    return names


def test_the_names_found_include_the_ones_known_to_take_numbers():
    assert {"from", "tail", "offset", "worker", "limit", "page"} <= page_query_names()
    assert ("/api/v1/workloads/{workload_id}/logs/", "tail") in schema_numbers()


def routes(resolver: URLResolver | None = None, prefix: str = "") -> list[str]:
    out = []
    for entry in (resolver or get_resolver()).url_patterns:
        pattern = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            if not pattern.startswith("admin/"):  # Django's own admin
                out += routes(entry, pattern)
        elif isinstance(entry, URLPattern):
            out.append(pattern)
    return out


def concrete(route: str, workload_id: int) -> str | None:
    """A route with its arguments filled (every id with the workload's: others answer 404,
    which is fine here); None for regex routes this cannot fill."""
    path = re.sub(r"<(?:int:)?(\w+)>", lambda m: str(workload_id) if "id" in m.group(1) or m.group(1) == "pk"
                  else "x", route)
    if any(c in path for c in "^$()[]\\?*+"):
        return None
    return "/" + path


@pytest.mark.django_db
@pytest.mark.parametrize("value", HOSTILE)
def test_no_numeric_api_parameter_answers_5xx(client, trio, value):
    workload = WorkloadFactory(project=trio.project, tenant=trio.tenant, submitted_by=trio.member, state="running")
    client.force_login(trio.owner)
    for path, name in schema_numbers():
        url = path.replace("{workload_id}", str(workload.id))
        response = client.get(url, {name: value})
        assert response.status_code < 500, (url, name, value, response.content[:300])
        if response.status_code == 400:
            assert name in response.content.decode(), (url, name, response.content[:300])


@pytest.mark.django_db
def test_no_page_answers_5xx_to_a_number_that_is_no_number(client, trio):
    """Each page: every name at once with each hostile value, then each name alone with a
    Unicode digit (alone, so a 400 for one name cannot hide a 500 for another)."""
    workload = WorkloadFactory(project=trio.project, tenant=trio.tenant, submitted_by=trio.member, state="running")
    names = sorted(page_query_names())
    client.force_login(trio.owner)
    seen = 0
    for route in routes():
        url = concrete(route, workload.id)
        if url is None:
            continue
        seen += 1
        queries = [{n: value for n in names} for value in HOSTILE] + [{n: HOSTILE[0]} for n in names]
        for query in queries:
            response = client.get(url, query)
            assert response.status_code < 500, (url, query if len(query) == 1 else "all", response.content[:300])
    assert seen >= 40  # the whole URL conf, not a handful
