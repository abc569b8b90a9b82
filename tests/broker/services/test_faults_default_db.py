"""Faults the default setup meets: a cluster whose backend cannot be built must not turn a
stored cancellation into an error, nor stop the reconciliation of the rest of the fleet."""
from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from broker.models import AuditRecord, Cluster, Escalation, ReconcileRun, Workload
from broker.services.following.reconcile import reconcile_fleet


@pytest.fixture
def stranded(settings, make_cluster, submit, drive):
    """A queued workload on a cluster whose backend can no longer be built (a REST transport
    without its URL, as a half-finished admin edit leaves it)."""
    settings.GPUBROKER_ENABLE_SLURM = True
    broken = make_cluster("broken")
    workload = drive(submit())
    assert workload.state == "queued" and workload.cluster == broken
    Cluster.objects.filter(id=broken.id).update(kind="slurm", config={"transport": "rest"})
    return workload


def test_cancel_answers_202_on_an_unbuildable_backend(trio, stranded, login, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):  # the propagation runs in the request
        response = login(trio.member).post(reverse("api-workload-cancel", args=[stranded.id]))
    assert response.status_code == 202
    stranded.refresh_from_db()
    assert stranded.state == "cancelling" and stranded.cancel_requested_at
    retry = AuditRecord.objects.get(workload=stranded, action="cancel.retrying")
    assert "cannot be built" in retry.message or "rest_url" in retry.message


def test_cancel_page_redirects_with_a_message_on_an_unbuildable_backend(trio, stranded, login,
                                                                      django_capture_on_commit_callbacks):
    client = login(trio.member)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("workload-cancel", args=[stranded.id]))
    assert response.status_code == 302
    assert response["Location"] == reverse("workload-detail", args=[stranded.id])
    assert any("Cancellation" in str(m) for m in get_messages(response.wsgi_request))
    assert Workload.objects.get(id=stranded.id).state == "cancelling"


def test_outsider_cannot_cancel_on_an_unbuildable_backend(trio, stranded, login):
    response = login(trio.outsider).post(reverse("api-workload-cancel", args=[stranded.id]))
    assert response.status_code == 404
    assert Workload.objects.get(id=stranded.id).cancel_requested_at is None


def test_reconcile_carries_on_past_a_broken_cluster(trio, stranded, make_cluster, sim, login):
    login(trio.member).post(reverse("api-workload-cancel", args=[stranded.id]))
    make_cluster("healthy")
    sim.get("healthy").inject_foreign_job(name="stray", gpus_per_worker=2, workload_id="wl-lost")

    report = reconcile_fleet()

    assert report.cancels_retried == 1  # tried, not confirmed: the broken cluster did not answer
    assert Workload.objects.get(id=stranded.id).state == "cancelling"
    orphan = Escalation.objects.get(kind="orphan_job")
    assert orphan.cluster.name == "healthy"  # the cluster after the broken one was still reconciled
    broken = Cluster.objects.get(name="broken")
    assert broken.health == "stale" and "rest_url" in broken.last_error
    assert ReconcileRun.objects.count() == 1


def test_cancel_is_confirmed_once_the_backend_can_be_built_again(trio, stranded, login,
                                                                django_capture_on_commit_callbacks):
    login(trio.member).post(reverse("api-workload-cancel", args=[stranded.id]))
    Cluster.objects.filter(id=stranded.cluster_id).update(kind="simulator", config={})
    with django_capture_on_commit_callbacks(execute=True):  # the cancel task reconcile enqueued runs
        reconcile_fleet()
    stranded.refresh_from_db()
    assert stranded.state == "cancelled"
