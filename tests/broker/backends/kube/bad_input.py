"""Shared by the bad-input tests: a Kubernetes cluster row that cannot be used, a job
running there with a confirmed reservation, and every periodic task run against it."""
from __future__ import annotations

from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from broker.models import Cluster, Reservation, Workload
from broker.tasks import poll_status, reconcile, sync_inventory
from tests.factories import UserFactory, WorkloadFactory


def broken_cluster(trio, kind: str = "kueue", credentials_ref: str = "", **config) -> Cluster:
    cluster = Cluster.objects.create(name="k8s-broken", kind=kind, region="eu-west",
                                     location="onprem", config=config,
                                     credentials_ref=credentials_ref, health="healthy",
                                     last_inventory_at=timezone.now())
    workload = WorkloadFactory(project=trio.project, cluster=cluster, state="running",
                               destination_job_id="team/running-job")
    Reservation.objects.create(workload=workload, tenant=trio.tenant, gpu_class=workload.gpu_class,
                               cluster=cluster, gpus=workload.total_gpus, state="confirmed",
                               expires_at=timezone.now() + timedelta(hours=1))
    return cluster


def run_every_task(cluster: Cluster) -> None:
    """The tasks the beat schedule runs; none may raise."""
    sync_inventory.delay(cluster.id)
    poll_status.delay(cluster.id)
    reconcile.delay()


def assert_stale_and_shown(cluster: Cluster, login, trio, expected: str) -> None:
    cluster.refresh_from_db()
    assert cluster.health == "stale", cluster.last_error
    assert expected in cluster.last_error
    running = Workload.objects.get(cluster=cluster)
    assert running.state == "running"  # stale is not ended
    assert running.reservations.get().state == "confirmed"  # never released
    body = login(trio.member).get(reverse("cluster-list")).content.decode()
    assert "k8s-broken" in body and expected in body
    nobody = UserFactory(username="no-tenant")  # the fleet is shown to members only
    assert "k8s-broken" not in login(nobody).get(reverse("cluster-list")).content.decode()
