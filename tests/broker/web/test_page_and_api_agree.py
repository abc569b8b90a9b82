"""The pages and the API agree on who may list what: for each kind of person, a list page and
its API list endpoint refuse the same people and show the same rows."""
from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from broker.models import Escalation
from tests.factories import (
    PASSWORD,
    ClusterFactory,
    GpuClassFactory,
    MembershipFactory,
    QuotaFactory,
    UserFactory,
    WorkloadFactory,
)

PEOPLE = ("owner", "member", "outsider", "tenant-admin", "platform-admin", "finance")

# list -> (page URL name, API URL name, how a row is named on the page, its API key)
LISTS = {
    "workloads": ("workload-list", "api-workloads", r'data-uid="([^"]+)"', "uid"),
    "quotas": ("quota-list", "api-quotas", r'<tr id="quota-(\d+)"', "id"),
    "escalations": ("escalation-list", "api-escalations", r"/escalations/(\d+)/resolve/", "id"),
    "quota requests": ("quota-request-list", "api-quota-requests", r'data-request="(\d+)"', "id"),
}


@pytest.fixture
def people(trio) -> dict:
    colleague = UserFactory(username="colleague")
    MembershipFactory(user=colleague, tenant=trio.tenant, role="researcher")
    return {"owner": trio.member, "member": colleague, "outsider": trio.outsider, "tenant-admin": trio.owner,
            "platform-admin": UserFactory(username="operator", is_staff=True), "finance": trio.finance}


@pytest.fixture
def both_tenants_work(trio) -> None:
    """Each tenant's workloads, quota, escalation and quota request; one escalation of nobody's."""
    from broker.services.quota.requests import quota_request_create

    gpu_class = GpuClassFactory()
    cluster = ClusterFactory(name="onprem")
    for project, who in ((trio.project, trio.member), (trio.other_project, trio.outsider)):
        WorkloadFactory.create_batch(2, project=project, submitted_by=who)
        QuotaFactory(tenant=project.tenant, gpu_class=gpu_class)
        Escalation.objects.create(kind="orphan_job", key=f"orphan:{project.slug}", cluster=cluster,
                                  tenant=project.tenant)
        quota_request_create(user=who, project_id=project.id, gpu_class=gpu_class.slug, extra_gpus=2,
                             reason="more", ends_on=timezone.now().date() + timedelta(days=3))
    Escalation.objects.create(kind="unclear", key="nobody's", cluster=cluster)


def _page(client: Client, name: str, pattern: str) -> tuple[int, set[str]]:
    response = client.get(reverse(name))
    ok = response.status_code == 200
    return response.status_code, set(re.findall(pattern, response.content.decode())) if ok else set()


def _api(client: Client, name: str, key: str) -> tuple[int, set[str]]:
    response = client.get(reverse(name), {"limit": 200})
    rows = response.json()["results"] if response.status_code == 200 else []
    return response.status_code, {str(row[key]) for row in rows}


@pytest.mark.parametrize("person", PEOPLE)
@pytest.mark.parametrize("kind", sorted(LISTS))
def test_list_page_and_api_list_refuse_and_show_the_same(person, kind, people, both_tenants_work):
    page_name, api_name, pattern, key = LISTS[kind]
    client = Client()
    assert client.login(username=people[person].username, password=PASSWORD)
    page, api = _page(client, page_name, pattern), _api(client, api_name, key)
    assert page == api, f"{person} on {kind}: page {page}, API {api}"


def test_the_agreement_is_not_vacuous(people, both_tenants_work):
    """Each person sees what their role gives them: the sets compared above are not all empty."""
    seen = {}
    for person in PEOPLE:
        client = Client()
        assert client.login(username=people[person].username, password=PASSWORD)
        seen[person] = {kind: _api(client, api_name, key) for kind, (_, api_name, _, key) in LISTS.items()}
    assert [len(seen[p]["workloads"][1]) for p in PEOPLE] == [2, 2, 2, 2, 4, 0]
    assert seen["finance"]["workloads"][0] == 403
    assert [len(seen[p]["escalations"][1]) for p in ("tenant-admin", "outsider", "platform-admin")] == [1, 1, 3]
    assert [len(seen[p]["quotas"][1]) for p in ("tenant-admin", "outsider", "platform-admin")] == [1, 1, 2]
    assert [len(seen[p]["quota requests"][1]) for p in PEOPLE] == [1, 0, 1, 1, 2, 0]
