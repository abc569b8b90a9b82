"""REST API: POST /api/v1/workloads/preview/ answers placement and stores nothing."""
from __future__ import annotations

import pytest
from django.urls import reverse

from broker.models import AuditRecord, Reservation, Workload

SPEC = {"name": "api-job", "command": "python train.py", "gpu_class": "a100-80gb", "gpus_per_worker": 2,
        "workers": 2}


def test_preview_answers_ranked_destinations_cost_start_and_quota_and_stores_nothing(trio, quota, cluster, api):
    client = api(trio.member)
    audited = AuditRecord.objects.count()
    response = client.post(reverse("api-workload-preview"), {"project": trio.project.id, **SPEC})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["chosen"]["cluster"] == cluster.name and body["destinations"][0] == body["chosen"]
    assert {"queue_wait_s", "startup_s", "gpu_cost", "transfer_cost"} <= set(body["chosen"]["terms"])
    assert body["chosen"]["expected_start"] and body["chosen"]["expected_cost"] == "4.80"  # 4 GPU-h x 1.2
    assert body["quota"] == {"gpu_class": "a100-80gb", "limit": 64, "borrow": 0, "used": 0, "remaining": 64}
    assert body["warnings"] == []
    assert not Workload.objects.exists() and not Reservation.objects.exists()
    assert AuditRecord.objects.count() == audited


@pytest.mark.parametrize("change, field", [
    ({"name": "Bad Name!"}, "name"),
    ({"gpus_per_worker": 0}, "gpus_per_worker"),
    ({"gpu_class": "no-such-class"}, "gpu_class"),
    ({"gpu_per_worker": 2}, "gpu_per_worker"),
    ({"workers": "two"}, "workers"),
])
def test_preview_bad_field_is_the_same_400_as_a_submission(trio, quota, cluster, api, change, field):
    client = api(trio.member)
    previewed = client.post(reverse("api-workload-preview"), {"project": trio.project.id, **SPEC, **change})
    submitted = client.post(reverse("api-workloads"), {"project": trio.project.id, **SPEC, **change})
    assert previewed.status_code == submitted.status_code == 400
    assert previewed.json() == submitted.json() and field in previewed.json()["error"]["fields"]


def test_outsider_previewing_into_another_tenants_project_gets_404(trio, quota, cluster, api):
    response = api(trio.outsider).post(reverse("api-workload-preview"), {"project": trio.project.id, **SPEC})
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"


def test_the_preview_says_when_its_destinations_are_queues_to_wait_in(trio, quota, make_cluster, sim, api):
    from broker.services.fleet.inventory import cluster_sync_inventory  # noqa: PLC0415

    busy = make_cluster("busy", nodes=[8, 8])  # Slurm: the two workers take a node each
    sim.get("busy").inject_foreign_job(gpus_per_worker=8, workers=2, account="locals", duration_s=36000)
    sim.advance(60)
    cluster_sync_inventory(cluster_id=busy.id)
    body = api(trio.member).post(reverse("api-workload-preview"), {"project": trio.project.id, **SPEC}).json()
    assert body["queued_after_s"] == 120.0 and body["chosen"]["cluster"] == "busy"
    assert body["reason"] == "capacity"
    outsider = api(trio.outsider).post(reverse("api-workload-preview"), {"project": trio.project.id, **SPEC})
    assert outsider.status_code == 404


def test_a_gang_that_prefers_one_host_is_ranked_where_one_host_holds_it(trio, quota, make_cluster, api):
    make_cluster("spread", flavor="kueue", nodes=[2, 2], price="1.0")
    make_cluster("one-host", flavor="kueue", nodes=[4], price="3.0")
    ask = {"project": trio.project.id, **SPEC, "topology_level": "host", "topology_mode": "preferred"}
    body = api(trio.member).post(reverse("api-workload-preview"), ask).json()
    assert [d["cluster"] for d in body["destinations"]] == ["one-host", "spread"]
    assert [d["topology"] for d in body["destinations"]] == [
        "in one host", "not in one host: no domain holds the gang now (score +4)"]


def test_a_gang_that_requires_one_host_leaves_out_the_cluster_with_the_rule_and_numbers(trio, quota, make_cluster,
                                                                                       api):
    make_cluster("spread", flavor="kueue", nodes=[2, 2])
    ask = {"project": trio.project.id, **SPEC, "topology_level": "host"}
    body = api(trio.member).post(reverse("api-workload-preview"), ask).json()
    assert body["destinations"] == []
    [left_out] = [e for e in body["excluded"] if e["cluster"] == "spread"]
    assert "can never hold 2 x 2 GPUs in one host" in left_out["detail"], left_out


def test_a_topology_level_on_a_single_worker_is_a_400_naming_the_field(trio, quota, cluster, api):
    ask = {"project": trio.project.id, **SPEC, "workers": 1, "topology_level": "rack"}
    response = api(trio.member).post(reverse("api-workloads"), ask)
    assert response.status_code == 400 and "topology_level" in response.json()["error"]["fields"]
