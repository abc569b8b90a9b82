"""Broker pages: what each role sees, and the outsider sees nothing (404)."""
from __future__ import annotations

import pytest
from django.urls import reverse

from broker.models import Escalation, Quota, Workload
from tests.factories import ClusterFactory, WorkloadFactory


@pytest.fixture
def placed(make_cluster, submit, drive):
    make_cluster("onprem")
    return drive(submit(gpus_per_worker=2, workers=2))


def test_researcher_submits_through_the_form_and_lands_on_the_workload_page(trio, quota, make_cluster, login):
    make_cluster("onprem")
    client = login(trio.member)
    response = client.post(reverse("workload-new"), {
        "project": trio.project.id, "name": "form-job", "command": "python train.py", "gpu_class": "a100-80gb",
        "gpus_per_worker": 2, "workers": 2, "cpus_per_worker": 4, "memory_gb_per_worker": 16,
        "time_limit_minutes": 30, "priority": "normal"})
    workload = Workload.objects.get(name="form-job")
    assert response.status_code == 302 and response["Location"] == reverse("workload-detail", args=[workload.id])
    assert workload.total_gpus == 4 and workload.submitted_by == trio.member


def test_form_shows_per_field_errors_and_stores_nothing(trio, quota, login):
    client = login(trio.member)
    response = client.post(reverse("workload-new"), {
        "project": trio.project.id, "name": "Bad Name!", "command": "x", "gpu_class": "a100-80gb",
        "gpus_per_worker": 1, "workers": 1, "cpus_per_worker": 1, "memory_gb_per_worker": 1,
        "time_limit_minutes": 1, "priority": "normal", "mig_profile": "huge"})
    body = response.content.decode()
    assert response.status_code == 200
    assert 'data-field="name"' in body and 'data-field="mig_profile"' in body
    assert not Workload.objects.exists()


def test_form_offers_only_the_researchers_projects_and_shows_quota_left(trio, quota, login):
    body = login(trio.member).get(reverse("workload-new")).content.decode()
    assert str(trio.project) in body and str(trio.other_project) not in body
    assert "data-quota-left>64<" in body


def test_outsider_cannot_submit_into_another_tenants_project(trio, quota, login):
    response = login(trio.outsider).post(reverse("workload-new"), {
        "project": trio.project.id, "name": "sneaky", "command": "x", "gpu_class": "a100-80gb",
        "gpus_per_worker": 1, "workers": 1, "cpus_per_worker": 1, "memory_gb_per_worker": 1,
        "time_limit_minutes": 1, "priority": "normal"})
    assert response.status_code == 200 and not Workload.objects.exists()


def test_workload_page_explains_where_it_went_and_why(trio, placed, login):
    body = login(trio.member).get(reverse("workload-detail", args=[placed.id])).content.decode()
    assert "onprem" in body and "placement.decided" in body and placed.destination_job_id in body
    assert 'data-state="queued"' in body


def test_workload_page_htmx_request_gets_only_the_status_partial(trio, placed, login):
    response = login(trio.member).get(reverse("workload-detail", args=[placed.id]), HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert 'id="workload-state"' in body and "<html" not in body and "Timeline" not in body


def test_workload_list_partial_refresh_returns_rows_only(trio, placed, login):
    response = login(trio.member).get(reverse("workload-list"), HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert placed.uid in body and "<html" not in body


def test_outsider_gets_404_for_workload_page_and_cancel(trio, placed, login):
    client = login(trio.outsider)
    assert client.get(reverse("workload-detail", args=[placed.id])).status_code == 404
    assert client.post(reverse("workload-cancel", args=[placed.id])).status_code == 404
    assert placed.uid not in client.get(reverse("workload-list")).content.decode()
    placed.refresh_from_db()
    assert placed.cancel_requested_at is None


def test_member_cancels_from_the_workload_page(trio, placed, login):
    response = login(trio.member).post(reverse("workload-cancel", args=[placed.id]))
    assert response.status_code == 302
    placed.refresh_from_db()
    assert placed.cancel_requested_at is not None and placed.state in ("cancelling", "cancelled")


def test_quota_edit_below_use_is_refused_with_the_numbers(trio, placed, login):
    quota = Quota.objects.get(tenant=trio.tenant)
    client = login(trio.owner)
    response = client.post(reverse("quota-edit", args=[quota.id]), {"limit_gpus": 3, "borrow_limit_gpus": 0},
                           HTTP_HX_REQUEST="true")
    assert response.status_code == 422
    assert "3 GPUs is below the 4 GPUs already reserved or running" in response.content.decode()
    response = client.post(reverse("quota-edit", args=[quota.id]), {"limit_gpus": 40, "borrow_limit_gpus": 4},
                           HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    quota.refresh_from_db()
    assert (quota.limit_gpus, quota.borrow_limit_gpus) == (40, 4)


def test_quota_pages_refuse_researchers_and_hide_other_tenants(trio, quota, login):
    assert login(trio.member).get(reverse("quota-list")).status_code == 403
    client = login(trio.outsider)
    assert trio.tenant.name not in client.get(reverse("quota-list")).content.decode()
    assert client.post(reverse("quota-edit", args=[quota.id]), {"limit_gpus": 1}).status_code == 404


def test_cluster_page_shows_freshness_and_flags_stale_clusters(trio, make_cluster, login, sim):
    from broker.services.fleet.inventory import cluster_sync_inventory

    cluster = make_cluster("onprem")
    sim.get("onprem").set_faults(unreachable=True)
    cluster_sync_inventory(cluster_id=cluster.id)
    body = login(trio.owner).get(reverse("cluster-list")).content.decode()
    assert "stale: no new placements" in body and 'id="policy-version"' in body


def test_escalation_queue_acknowledge_and_resolve_with_outcome(trio, make_cluster, login, sim):
    from broker.services.following.reconcile import reconcile_fleet

    make_cluster("onprem")
    sim.get("onprem").inject_foreign_job(gpus_per_worker=2, workload_id="wl-lost")
    reconcile_fleet()
    esc = Escalation.objects.get()
    Escalation.objects.filter(id=esc.id).update(tenant=trio.tenant)
    client = login(trio.owner)
    assert "Destination job with no broker record" in client.get(reverse("escalation-list")).content.decode()
    client.post(reverse("escalation-action", args=[esc.id, "acknowledge"]))
    client.post(reverse("escalation-action", args=[esc.id, "resolve"]), {"outcome": "student test job, killed"})
    esc.refresh_from_db()
    assert esc.state == "resolved" and esc.outcome == "student test job, killed" and esc.resolved_by == trio.owner
    assert login(trio.outsider).post(reverse("escalation-action", args=[esc.id, "acknowledge"])).status_code == 404


def test_fleet_overview_shows_capacity_and_figures(trio, placed, login):
    body = login(trio.member).get(reverse("fleet")).content.decode()
    assert "onprem" in body and "Queue depth" in body and "Reconciliation lag" in body


def test_anonymous_users_are_sent_to_login_from_every_page(client, db):
    for name in ("workload-list", "workload-new", "quota-list", "cluster-list", "escalation-list", "fleet"):
        response = client.get(reverse(name))
        assert response.status_code == 302 and "/login/" in response["Location"], name
