"""/api/v1/cluster-identities/ and /api/v1/projects/<id>/run-as/: tenant admins set who
their people are at the clusters; others get 403, outsiders 404, bad input a field's 400."""
from __future__ import annotations

import json

import pytest

from broker.models import AuditRecord
from portal.identity.models import ClusterIdentity
from tests.factories import GpuClassFactory, MembershipFactory


def _put(api, user, person, body):
    return api(user).client.put(f"/api/v1/cluster-identities/{person.id}/", json.dumps(body),
                                content_type="application/json")


def test_admin_sets_reads_and_clears_a_members_identity(trio, api):
    resp = _put(api, trio.owner, trio.member, {"posix_user": "gpb-member", "k8s_user": "member@example.org"})
    assert resp.status_code == 200, resp.content
    assert resp.json() == {"user_id": trio.member.id, "username": "member", "posix_user": "gpb-member",
                           "posix_group": "", "k8s_user": "member@example.org", "source": "admin"}
    listed = api(trio.owner).get("/api/v1/cluster-identities/").json()["results"]
    assert {"member": "gpb-member"}.items() <= {p["username"]: p["posix_user"] for p in listed}.items()
    assert "outsider" not in {p["username"] for p in listed}
    assert AuditRecord.objects.filter(action="identity.cluster_identity_set", tenant=trio.tenant).count() == 1
    cleared = api(trio.owner).delete(f"/api/v1/cluster-identities/{trio.member.id}/")
    assert cleared.status_code == 200 and cleared.json()["posix_user"] == ""
    assert not ClusterIdentity.objects.filter(user=trio.member).exists()


@pytest.mark.parametrize("body, field", [
    ({"posix_user": "Alice"}, "posix_user"),
    ({"posix_user": "root"}, "posix_user"),
    ({"posix_user": "1001"}, "posix_user"),
    ({"posix_user": "x" * 40}, "posix_user"),
    ({"posix_user": "gpb-member", "posix_group": "wheel group"}, "posix_group"),
    ({"posix_user": "gpb-member", "k8s_user": "system:admin"}, "k8s_user"),
    ({"posix_user": "gpb-member", "uid": 0}, "uid"),
    ({"posix_user": 1001}, "posix_user"),
    ({}, "posix_user"),
])
def test_bad_identity_is_a_400_naming_the_field_and_changes_nothing(trio, api, body, field):
    resp = _put(api, trio.owner, trio.member, body)
    assert resp.status_code == 400, resp.content
    assert field in resp.json()["error"]["fields"]
    assert not ClusterIdentity.objects.exists()


def test_a_posix_name_belongs_to_one_person(trio, api):
    assert _put(api, trio.owner, trio.owner, {"posix_user": "gpb-shared"}).status_code == 200
    resp = _put(api, trio.owner, trio.member, {"posix_user": "gpb-shared"})
    assert resp.status_code == 400 and "already the cluster identity of owner" in str(resp.json())


def test_outsider_gets_404_and_researcher_403(trio, api):
    url = f"/api/v1/cluster-identities/{trio.member.id}/"
    outsider = api(trio.outsider)  # admin of the other tenant
    assert outsider.get(url).status_code == 404
    assert _put(api, trio.outsider, trio.member, {"posix_user": "gpb-evil"}).status_code == 404
    assert outsider.delete(url).status_code == 404
    assert outsider.patch(f"/api/v1/projects/{trio.project.id}/run-as/", {"run_as": "person"}).status_code == 404
    assert api(trio.member).get(url).status_code == 403
    assert _put(api, trio.member, trio.member, {"posix_user": "gpb-me"}).status_code == 403
    assert not ClusterIdentity.objects.exists()


def test_a_person_in_a_tenant_the_admin_does_not_run_is_theirs_to_set_only_with_that_tenant(trio, api):
    MembershipFactory(user=trio.member, tenant=trio.other_tenant, role="researcher")
    resp = _put(api, trio.owner, trio.member, {"posix_user": "gpb-member"})
    assert resp.status_code == 403 and "biology" in resp.json()["error"]["message"]


def test_project_run_as_is_set_by_its_admin_and_checked(trio, api):
    url = f"/api/v1/projects/{trio.project.id}/run-as/"
    assert api(trio.owner).patch(url, {"run_as": "everyone"}).json()["error"]["fields"].keys() == {"run_as"}
    resp = api(trio.owner).patch(url, {"run_as": "person"})
    assert resp.status_code == 200 and resp.json()["run_as"] == "person"
    assert AuditRecord.objects.filter(action="identity.project_run_as_set", tenant=trio.tenant).exists()
    assert api(trio.member).patch(url, {"run_as": "account"}).status_code == 403


def test_submitting_to_a_run_as_person_project_without_an_identity_is_a_400_on_project(trio, api):
    GpuClassFactory(slug="a100-80gb")
    api(trio.owner).patch(f"/api/v1/projects/{trio.project.id}/run-as/", {"run_as": "person"})
    body = {"project": trio.project.id, "name": "train", "command": "python train.py", "gpu_class": "a100-80gb"}
    resp = api(trio.member).post("/api/v1/workloads/", body)
    assert resp.status_code == 400 and "no cluster identity" in resp.json()["error"]["fields"]["project"][0]
    _put(api, trio.owner, trio.member, {"posix_user": "gpb-member"})
    assert api(trio.member).post("/api/v1/workloads/", body).status_code == 201
