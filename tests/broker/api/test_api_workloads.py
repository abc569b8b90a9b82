"""REST API, workloads: submit, list, detail, timeline, cancel; the outsider sees nothing."""
from __future__ import annotations

import pytest
from django.urls import reverse

from broker.models import AuditRecord, Workload
from tests.factories import WorkloadFactory

SPEC = {"name": "api-job", "command": "python train.py", "gpu_class": "a100-80gb", "gpus_per_worker": 2,
        "workers": 2}


def _rows(response) -> list[dict]:
    body = response.json()
    return body["results"] if isinstance(body, dict) and "results" in body else body


# --- create --------------------------------------------------------------------------

def test_researcher_creates_a_workload_and_gets_201_with_it(trio, quota, cluster, api):
    response = api(trio.member).post(reverse("api-workloads"), {"project": trio.project.id, **SPEC})
    assert response.status_code == 201, response.content
    body = response.json()
    workload = Workload.objects.get(id=body["id"])
    assert body["name"] == "api-job" and body["project"] == "lattice" and body["gpu_class"] == "a100-80gb"
    assert body["total_gpus"] == 4 and body["spec"]["workers"] == 2 and body["uid"] == workload.uid
    assert workload.submitted_by == trio.member and workload.tenant == trio.tenant
    assert AuditRecord.objects.filter(workload=workload, action="workload.submitted").exists()


@pytest.mark.parametrize("change, field", [
    ({"name": "Bad Name!"}, "name"),
    ({"mig_profile": "huge"}, "mig_profile"),
    ({"gpus_per_worker": 0}, "gpus_per_worker"),
    ({"workers": 100000}, "workers"),
    ({"priority": "urgent"}, "priority"),
    ({"gpu_class": "no-such-class"}, "gpu_class"),
])
def test_spec_validation_errors_are_400_naming_the_field(trio, quota, api, change, field):
    response = api(trio.member).post(reverse("api-workloads"), {"project": trio.project.id, **SPEC, **change})
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"], response.json()
    assert not Workload.objects.exists()


@pytest.mark.parametrize("missing", ["project", "name", "command"])
def test_missing_required_field_is_400_naming_it(trio, quota, api, missing):
    data = {"project": trio.project.id, **SPEC}
    del data[missing]
    response = api(trio.member).post(reverse("api-workloads"), data)
    assert response.status_code == 400 and missing in response.json()["error"]["fields"]


def test_wrongly_typed_field_is_400_naming_it(trio, quota, api):
    response = api(trio.member).post(reverse("api-workloads"),
                                     {"project": trio.project.id, **SPEC, "gpus_per_worker": "two"})
    assert response.status_code == 400 and "gpus_per_worker" in response.json()["error"]["fields"]


def test_outsider_cannot_submit_into_another_tenants_project(trio, quota, api):
    response = api(trio.outsider).post(reverse("api-workloads"), {"project": trio.project.id, **SPEC})
    assert response.status_code == 404
    assert not Workload.objects.exists()


@pytest.mark.parametrize("who", ["owner", "finance"])
def test_non_researchers_may_not_submit(trio, quota, api, who):
    response = api(getattr(trio, who)).post(reverse("api-workloads"), {"project": trio.project.id, **SPEC})
    assert response.status_code == 403
    assert not Workload.objects.exists()


def test_anonymous_clients_are_refused(client, db):
    for url in (reverse("api-workloads"), reverse("api-quotas"), reverse("api-clusters"),
                reverse("api-escalations")):
        assert client.get(url).status_code in (401, 403), url


# --- list and detail -----------------------------------------------------------------

def test_list_shows_only_the_own_tenants_workloads(trio, api, gpu_classes):
    mine = WorkloadFactory(project=trio.project)
    theirs = WorkloadFactory(project=trio.other_project)
    ids = {row["id"] for row in _rows(api(trio.member).get(reverse("api-workloads")))}
    assert ids == {mine.id}
    ids = {row["id"] for row in _rows(api(trio.outsider).get(reverse("api-workloads")))}
    assert ids == {theirs.id}


def test_list_filters_by_state(trio, api, gpu_classes):
    WorkloadFactory(project=trio.project, state="running", name="runs")
    WorkloadFactory(project=trio.project, state="completed", name="done")
    rows = _rows(api(trio.member).get(reverse("api-workloads"), state="running"))
    assert [r["name"] for r in rows] == ["runs"]


def test_list_is_paginated_by_keyset_newest_first(trio, api, gpu_classes):
    made = [WorkloadFactory(project=trio.project, name=f"job-{i}") for i in range(3)]
    client = api(trio.member)
    body = client.get(reverse("api-workloads"), limit=2).json()
    assert [r["name"] for r in body["results"]] == ["job-2", "job-1"] and body["next"]
    assert set(body) == {"results", "next"}
    second = client.client.get(body["next"]).json()
    assert [r["id"] for r in second["results"]] == [made[0].id] and second["next"] is None


def test_detail_says_where_it_went(trio, placed, cluster, api):
    body = api(trio.member).get(reverse("api-workload", args=[placed.id])).json()
    assert body["id"] == placed.id and body["state"] == "queued" and body["cluster"] == "onprem"
    assert body["destination_job_id"] == placed.destination_job_id
    assert body["placement"]["chosen"]["cluster"] == "onprem" and body["policy_version"]


def test_timeline_lists_the_audit_records_in_order(trio, placed, api):
    rows = _rows(api(trio.member).get(reverse("api-workload-timeline", args=[placed.id])))
    actions = [r["action"] for r in rows]
    assert actions[:2] == ["workload.submitted", "reservation.created"]
    assert "placement.decided" in actions and "dispatch.accepted" in actions
    decided = next(r for r in rows if r["action"] == "placement.decided")
    assert decided["cluster"] == "onprem" and decided["policy_version"] and decided["score_breakdown"]


# --- cancel --------------------------------------------------------------------------

def test_cancel_is_202_and_propagates(trio, placed, api, sim):
    response = api(trio.member).post(reverse("api-workload-cancel", args=[placed.id]))
    assert response.status_code == 202
    assert response.json()["state"] in ("cancelling", "cancelled") and response.json()["cancel_requested_at"]
    placed.refresh_from_db()
    assert placed.cancel_requested_at is not None
    assert AuditRecord.objects.filter(workload=placed, action="cancel.requested").exists()


def test_cancel_before_dispatch_ends_it_at_once(trio, quota, api):
    created = api(trio.member).post(reverse("api-workloads"), {"project": trio.project.id, **SPEC}).json()
    response = api(trio.member).post(reverse("api-workload-cancel", args=[created["id"]]))
    assert response.status_code == 202 and response.json()["state"] == "cancelled"


def test_cancel_twice_is_harmless(trio, placed, api):
    client = api(trio.member)
    first = client.post(reverse("api-workload-cancel", args=[placed.id])).json()
    second = client.post(reverse("api-workload-cancel", args=[placed.id]))
    assert second.status_code == 202 and second.json()["cancel_requested_at"] == first["cancel_requested_at"]
    assert AuditRecord.objects.filter(workload=placed, action="cancel.requested").count() == 1


# --- the outsider gets 404 on every workload endpoint, and nothing changes ------------

def test_outsider_gets_404_on_every_workload_endpoint(trio, placed, api):
    client = api(trio.outsider)
    for name in ("api-workload", "api-workload-timeline"):
        response = client.get(reverse(name, args=[placed.id]))
        assert response.status_code == 404, name
        assert placed.uid not in response.content.decode() and placed.name not in response.content.decode()
    assert client.post(reverse("api-workload-cancel", args=[placed.id])).status_code == 404
    placed.refresh_from_db()
    assert placed.cancel_requested_at is None


def test_404_for_an_outsiders_object_matches_404_for_a_missing_one(trio, placed, api):
    client = api(trio.outsider)
    hidden = client.get(reverse("api-workload", args=[placed.id]))
    missing = client.get(reverse("api-workload", args=[placed.id + 1000]))
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json() == missing.json()


def test_finance_may_neither_list_nor_open_workloads_as_on_the_pages(trio, placed, api):
    client = api(trio.finance)
    listed, opened = client.get(reverse("api-workloads")), client.get(reverse("api-workload", args=[placed.id]))
    assert listed.status_code == opened.status_code == 403  # the queue page and the detail page say 403 too
    assert placed.name not in listed.content.decode() + opened.content.decode()
