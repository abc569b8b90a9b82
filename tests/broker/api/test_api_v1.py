"""API v1 beyond the workload basics: me, projects, explain, attempts, the error shape,
keyset pagination limits, strict input and idempotent creation; the old paths redirect."""
from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from broker.api.models import IdempotencyKey
from broker.web.explain import RULE_WORDS
from broker.models import Quota, Workload
from tests.factories import WorkloadFactory

SPEC = {"name": "api-job", "command": "python train.py", "gpu_class": "a100-80gb", "gpus_per_worker": 2,
        "workers": 2}
HUGE = 2**64


def _create(client, trio, key: str | None = None, **change):
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    return client.client.post(reverse("api-workloads"), {"project": trio.project.id, **SPEC, **change},
                              content_type="application/json", **headers)


# --- me and projects --------------------------------------------------------------------

def test_me_names_the_user_roles_and_tenants(trio, api):
    body = api(trio.owner).get(reverse("api-me")).json()
    assert body == {"username": trio.owner.username, "roles": ["admin"], "tenants": [trio.tenant.slug],
                    "is_operator": False}


def test_projects_lists_only_the_users_projects_with_their_identities(trio, api):
    rows = api(trio.member).get(reverse("api-projects")).json()["results"]
    assert [(r["id"], r["slug"], r["tenant"]) for r in rows] == [(trio.project.id, "lattice", trio.tenant.slug)]
    assert {"slurm_account", "namespace", "queue", "cost_centre", "name"} <= set(rows[0])
    outsider_ids = {r["id"] for r in api(trio.outsider).get(reverse("api-projects")).json()["results"]}
    assert trio.project.id not in outsider_ids and trio.other_project.id in outsider_ids


# --- explain and attempts -----------------------------------------------------------------

def test_explain_gives_the_ranking_and_the_choice(trio, placed, api):
    body = api(trio.member).get(reverse("api-workload-explain", args=[placed.id])).json()
    assert body["chosen"] == {"cluster": "onprem", "pool": body["candidates"][0]["pool"]}
    assert body["policy_version"] == placed.policy_version
    first = body["candidates"][0]
    assert first["cluster"] == "onprem" and isinstance(first["score"], float)
    assert {"queue_wait_s", "gpu_cost"} <= set(first["terms"]) and body["excluded"] == []


def test_explain_names_each_excluded_cluster_and_rule(trio, quota, make_cluster, submit, drive, api):
    make_cluster("onprem")
    make_cluster("small", gpu_model="T4", memory_gb=16)
    workload = drive(submit(gpus_per_worker=2, workers=1))
    body = api(trio.member).get(reverse("api-workload-explain", args=[workload.id])).json()
    excluded = {e["cluster"]: e for e in body["excluded"]}
    small = excluded["small"]
    assert small["rule"] in RULE_WORDS and small["rule_text"] == RULE_WORDS[small["rule"]] and small["detail"]
    assert "small" not in {c["cluster"] for c in body["candidates"]}


def test_attempts_list_the_dispatch_attempts(trio, placed, api):
    rows = api(trio.member).get(reverse("api-workload-attempts", args=[placed.id])).json()["results"]
    assert [(r["number"], r["cluster"], r["destination_job_id"]) for r in rows] == [
        (1, "onprem", placed.destination_job_id)]
    assert rows[0]["state"]


@pytest.mark.parametrize("name", ["api-workload-explain", "api-workload-attempts"])
def test_outsider_gets_404_and_the_tenants_finance_403_on_explain_and_attempts(trio, placed, api, name):
    for who, status, code in (("outsider", 404, "not_found"), ("finance", 403, "permission_denied")):
        response = api(getattr(trio, who)).get(reverse(name, args=[placed.id]))
        assert response.status_code == status and response.json()["error"]["code"] == code
        assert "onprem" not in response.content.decode()


# --- the error shape and pagination limits ---------------------------------------------------

def test_every_error_has_the_one_shape(trio, placed, api):
    client = api(trio.member)
    answers = [client.get(reverse("api-workload", args=[placed.id + 99])),          # 404
               client.get(reverse("api-quotas")),                                 # 403
               client.post(reverse("api-workloads"), {"project": trio.project.id}),  # 400
               Client().get(reverse("api-workloads"))]                            # 401
    assert [a.status_code for a in answers] == [404, 403, 400, 401]
    for answer in answers:
        error = answer.json()["error"]
        assert set(error) == {"code", "message", "fields"} and error["code"] and error["message"]
    assert {"name", "command"} <= set(answers[2].json()["error"]["fields"])


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": 201}, {"limit": HUGE}, {"limit": "ten"},
                                    {"limit": "-1"}, {"cursor": "!!"}, {"cursor": "eyJrIjogLTF9"}])
@pytest.mark.parametrize("name", ["api-workloads", "api-projects", "api-tokens", "api-clusters", "api-usage"])
def test_bad_limit_or_cursor_is_400_naming_it(trio, api, name, params):
    response = api(trio.member).get(reverse(name), **params)
    assert response.status_code == 400, (name, params, response.content)
    assert set(params) <= set(response.json()["error"]["fields"])


def test_limit_200_is_the_largest_page(trio, api, gpu_classes):
    WorkloadFactory(project=trio.project)
    assert api(trio.member).get(reverse("api-workloads"), limit=200).status_code == 200


def test_unknown_state_filter_is_400(trio, api):
    response = api(trio.member).get(reverse("api-workloads"), state="runing")
    assert response.status_code == 400 and "state" in response.json()["error"]["fields"]


# --- strict input ---------------------------------------------------------------------------

def test_misspelt_field_is_400_naming_it_and_creates_nothing(trio, quota, api):
    data = {"project": trio.project.id, **SPEC, "gpu_per_worker": 8}
    response = api(trio.member).post(reverse("api-workloads"), data)
    assert response.status_code == 400, response.content
    fields = response.json()["error"]["fields"]
    assert list(fields) == ["gpu_per_worker"] and "gpus_per_worker" in fields["gpu_per_worker"][0]
    assert "gpu_per_worker" in response.json()["error"]["message"]
    assert not Workload.objects.exists()


@pytest.mark.parametrize("change, field", [
    ({"project": HUGE}, "project"), ({"gpus_per_worker": HUGE}, "gpus_per_worker"), ({"workers": -HUGE}, "workers"),
    ({"data_size_gb": 1e308}, "data_size_gb"), ({"time_limit_minutes": HUGE}, "time_limit_minutes")])
def test_huge_numbers_in_a_workload_are_400_naming_the_field(trio, quota, api, change, field):
    response = api(trio.member).post(reverse("api-workloads"), {"project": trio.project.id, **SPEC, **change})
    assert response.status_code == 400 and field in response.json()["error"]["fields"], response.content
    assert not Workload.objects.exists()


def test_misspelt_data_location_is_400_naming_the_field(trio, quota, make_cluster, api):
    make_cluster("onprem")
    from broker.models import Cluster

    Cluster.objects.filter(name="onprem").update(config={"data_locations": ["onprem-nfs"], "image_pull_s": 0})
    client = api(trio.member)
    data = {"project": trio.project.id, **SPEC}
    response = client.post(reverse("api-workloads"), {**data, "data_location": "onprem-nsf"})
    assert response.status_code == 400
    assert "onprem-nfs" in response.json()["error"]["fields"]["data_location"][0]
    assert not Workload.objects.exists()
    ok = client.post(reverse("api-workloads"), {**data, "data_location": "onprem-nfs"})
    assert ok.status_code == 201 and ok.json()["spec"]["data_location"] == "onprem-nfs"


@pytest.mark.parametrize("data, field", [
    ({"limit_gpus": HUGE}, "limit_gpus"), ({"borrow_limit_gpus": HUGE}, "borrow_limit_gpus"),
    ({"limit_gpus": 2**63 + 1}, "limit_gpus"), ({"limt_gpus": 3}, "limt_gpus")])
def test_quota_patch_with_huge_or_unknown_field_is_400(trio, quota, api, data, field):
    response = api(trio.owner).patch(reverse("api-quota", args=[quota.id]), data)
    assert response.status_code == 400 and field in response.json()["error"]["fields"], response.content
    quota.refresh_from_db()
    assert (quota.limit_gpus, quota.borrow_limit_gpus) == (64, 0)


def test_quota_patch_is_partial(trio, quota, api):
    client = api(trio.owner)
    assert client.patch(reverse("api-quota", args=[quota.id]), {"borrow_limit_gpus": 8}).status_code == 200
    quota.refresh_from_db()
    assert (quota.limit_gpus, quota.borrow_limit_gpus) == (64, 8)
    assert client.patch(reverse("api-quota", args=[quota.id]), {"limit_gpus": 32}).json()["borrow_limit_gpus"] == 8
    quota.refresh_from_db()
    assert (quota.limit_gpus, quota.borrow_limit_gpus) == (32, 8)


# --- idempotent creation --------------------------------------------------------------------

def test_retry_with_the_same_key_returns_the_same_workload(trio, quota, api):
    client = api(trio.member)
    first = _create(client, trio, key="retry-1")
    second = _create(client, trio, key="retry-1")
    assert (first.status_code, second.status_code) == (201, 200)
    assert first.json()["id"] == second.json()["id"] and first.json()["uid"] == second.json()["uid"]
    assert Workload.objects.count() == 1 and IdempotencyKey.objects.count() == 1


def test_the_key_is_per_user_and_a_new_key_makes_a_new_workload(trio, quota, api):
    from tests.factories import MembershipFactory, UserFactory

    colleague = UserFactory(username="colleague")
    MembershipFactory(user=colleague, tenant=trio.tenant, role="researcher")
    assert _create(api(trio.member), trio, key="k").status_code == 201
    assert _create(api(colleague), trio, key="k").status_code == 201
    assert _create(api(trio.member), trio, key="k2", name="api-job-2").status_code == 201
    assert Workload.objects.count() == 3


def test_same_key_with_a_different_body_is_409_and_creates_nothing(trio, quota, api):
    client = api(trio.member)
    _create(client, trio, key="k")
    response = _create(client, trio, key="k", workers=1)
    assert response.status_code == 409 and response.json()["error"]["code"] == "idempotency_key_reused"
    assert Workload.objects.count() == 1


def test_a_refused_request_does_not_use_up_its_key(trio, quota, api):
    client = api(trio.member)
    assert _create(client, trio, key="k", gpus_per_worker=0).status_code == 400
    assert not IdempotencyKey.objects.exists()
    assert _create(client, trio, key="k", gpus_per_worker=0).status_code == 400


def test_malformed_idempotency_key_is_400(trio, quota, api):
    response = _create(api(trio.member), trio, key="x" * 201)
    assert response.status_code == 400 and "Idempotency-Key" in response.json()["error"]["fields"]
    assert not Workload.objects.exists()


# --- the old paths ----------------------------------------------------------------------------

@pytest.mark.parametrize("old, new", [("/api/workloads/", "/api/v1/workloads/"),
                                      ("/api/workloads/7/cancel/?x=1", "/api/v1/workloads/7/cancel/?x=1"),
                                      ("/api/schema/", "/api/v1/schema/")])
def test_old_api_paths_answer_308_to_v1(db, old, new):
    for method in ("get", "post"):
        response = getattr(Client(), method)(old)
        assert response.status_code == 308 and response["Location"] == new, (method, old)


def test_the_api_root_leads_to_its_docs(db):
    assert Client().get("/api/v1").status_code == 301  # APPEND_SLASH, not the old-path redirect
    response = Client().get("/api/v1/")
    assert response.status_code == 302 and response["Location"] == reverse("api-docs")


def test_quota_rows_are_unchanged_by_refused_patches(trio, quota, api):
    client = api(trio.owner)
    client.patch(reverse("api-quota", args=[quota.id]), {"limit_gpus": "lots"})
    assert Quota.objects.get(id=quota.id).limit_gpus == 64


@pytest.mark.parametrize("name", ["api-workload", "api-workload-explain", "api-workload-attempts", "api-quota",
                                  "api-cluster"])
def test_an_id_beyond_any_database_integer_is_404_not_500(trio, api, name):
    response = api(trio.owner).get(reverse(name, args=[HUGE]))
    assert response.status_code in (403, 404) and response.json()["error"]["code"] in ("not_found",
                                                                                       "permission_denied")


def test_the_key_is_unique_per_user_in_the_database(trio, placed):
    from django.db import IntegrityError, transaction

    IdempotencyKey.objects.create(user=trio.member, key="k", request_hash="a" * 64, workload=placed)
    with pytest.raises(IntegrityError), transaction.atomic():
        IdempotencyKey.objects.create(user=trio.member, key="k", request_hash="a" * 64, workload=placed)


@pytest.mark.parametrize("change, field", [({"gpus_per_worker": "8"}, "gpus_per_worker"), ({"name": 7}, "name"),
                                           ({"checkpointable": "yes"}, "checkpointable"),
                                           ({"gpus_per_worker": True}, "gpus_per_worker"),
                                           ({"gpu_models": ["A100", 3]}, "gpu_models")])
def test_a_value_of_the_wrong_json_type_is_400_not_coerced(trio, quota, api, change, field):
    response = api(trio.member).post(reverse("api-workloads"), {"project": trio.project.id, **SPEC, **change})
    assert response.status_code == 400 and field in response.json()["error"]["fields"], response.content
    assert not Workload.objects.exists()


def test_a_form_encoded_body_is_415(trio, quota, api):
    response = api(trio.member).client.post(reverse("api-workloads"), {"project": trio.project.id, **SPEC})
    assert response.status_code == 415 and response.json()["error"]["code"] == "unsupported_media_type"


@pytest.mark.parametrize("name, params", [("api-usage", {"month": ""}), ("api-chargeback", {"tenant": ""}),
                                          ("api-chargeback", {"month": ""})])
def test_an_empty_query_value_is_400_not_ignored(trio, api, name, params):
    response = api(trio.finance).get(reverse(name), **params)
    assert response.status_code == 400 and set(params) <= set(response.json()["error"]["fields"])
