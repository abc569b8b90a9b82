"""/metrics: Prometheus text parsed by the client library's own parser, real values, guarded."""
from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from broker.models import AuditRecord, ReconcileRun, WorkloadState
from tests.factories import ClusterFactory, GpuClassFactory, GpuPoolFactory, WorkloadFactory

TOKEN = "scrape-token-0123456789"


def scrape(client, **extra) -> dict[tuple, float]:
    response = client.get("/metrics", **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(response.content.decode()) for s in family.samples}


@pytest.fixture
def fleet(trio):
    now = timezone.now()
    GpuClassFactory(slug="a100-40gb", gpu_models=["A100"], min_memory_gb=40)
    GpuClassFactory(slug="a100-80gb", gpu_models=["A100"], min_memory_gb=80)
    lab = ClusterFactory(name="lab", last_inventory_at=now - timedelta(seconds=42))
    GpuPoolFactory(cluster=lab, name="gpu", gpu_model="A100", gpu_memory_gb=80, gpus_total=32,
                   gpus_allocatable=30, gpus_allocated=20, gpus_reserved=4, gpus_idle=6)
    GpuPoolFactory(cluster=lab, name="mig", gpu_model="A100", gpu_memory_gb=80, partitioning="1g.10gb",
                   gpus_total=28, gpus_allocatable=28, gpus_allocated=7, gpus_idle=21)
    cloud = ClusterFactory(name="cloud", location="cloud", price_per_gpu_hour=Decimal("4.00"))
    WorkloadFactory(project=trio.project, state=WorkloadState.WAITING)
    WorkloadFactory(project=trio.other_project, state=WorkloadState.QUEUED, cluster=lab)
    ran = WorkloadFactory(project=trio.project, state=WorkloadState.RUNNING, cluster=cloud, total_gpus=2)
    type(ran).objects.filter(pk=ran.pk).update(created_at=now - timedelta(seconds=150),
                                               dispatched_at=now - timedelta(seconds=50),
                                               started_at=now - timedelta(seconds=45))
    AuditRecord.objects.create(action="dispatch.rejected", cluster="lab", message="no room")
    ReconcileRun.objects.create(started_at=now - timedelta(seconds=20), finished_at=now - timedelta(seconds=15))
    return {"ran": ran}


def test_scrape_reports_gpus_per_cluster_class_with_mig_slices_apart(fleet, client):
    values = scrape(client)
    whole = (("cluster", "lab"), ("gpu_class", "a100-80gb"), ("location", "onprem"), ("resource", "gpu"))
    mig = (("cluster", "lab"), ("gpu_class", "a100-80gb"), ("location", "onprem"), ("resource", "mig-1g.10gb"))
    assert values[("gpubroker_gpus", (*whole, ("state", "total")))] == 32  # not 32 + 28 slices
    assert values[("gpubroker_gpus", (*whole, ("state", "reserved")))] == 4
    assert values[("gpubroker_gpus", (*whole, ("state", "idle")))] == 6
    assert values[("gpubroker_gpus", (*mig, ("state", "total")))] == 28
    assert values[("gpubroker_gpus", (*mig, ("state", "allocatable")))] == 28


def test_scrape_reports_queue_histograms_failures_lags_and_spend(fleet, client):
    values = scrape(client)
    assert values[("gpubroker_queue_depth", (("gpu_class", "a100-80gb"),))] == 2
    assert values[("gpubroker_queue_wait_seconds_count", ())] == 1
    assert values[("gpubroker_queue_wait_seconds_bucket", (("le", "60.0"),))] == 0
    assert values[("gpubroker_queue_wait_seconds_bucket", (("le", "120.0"),))] == 1
    assert values[("gpubroker_time_to_first_gpu_seconds_bucket", (("le", "10.0"),))] == 1
    assert values[("gpubroker_failed_placements_total", ())] == 1
    assert 15 <= values[("gpubroker_reconcile_lag_seconds", ())] < 60
    assert 42 <= values[("gpubroker_inventory_age_seconds", (("cluster", "lab"),))] < 90
    assert 0 < values[("gpubroker_cloud_spend_month", (("cluster", "cloud"),))] <= 0.11  # 2 GPUs x <=45 s x 4.00/h


def test_scrape_without_token_from_an_address_not_allowed_is_refused(fleet, client):
    response = client.get("/metrics", REMOTE_ADDR="203.0.113.9")
    assert response.status_code == 403
    assert b"gpubroker_gpus" not in response.content


def test_scrape_with_the_token_from_anywhere_and_not_with_a_wrong_one(fleet, client, settings):
    settings.GPUBROKER_METRICS_TOKEN = TOKEN
    settings.GPUBROKER_METRICS_ALLOW = []
    assert scrape(client, REMOTE_ADDR="203.0.113.9", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    wrong = client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_AUTHORIZATION="Bearer not-the-token")
    assert wrong.status_code == 401 and wrong["WWW-Authenticate"].startswith("Bearer")
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 403


def test_allow_list_takes_networks(fleet, client, settings):
    settings.GPUBROKER_METRICS_ALLOW = ["10.1.0.0/16"]
    assert client.get("/metrics", REMOTE_ADDR="10.1.200.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="10.2.0.1").status_code == 403


def test_figures_survive_a_restart_because_they_are_read_from_the_database(fleet, client):
    # a fresh collector (as after a restart) reports the same counts: nothing lives in the process
    assert scrape(client)[("gpubroker_failed_placements_total", ())] == 1
    assert scrape(client)[("gpubroker_failed_placements_total", ())] == 1


def test_scrape_reports_each_tenants_cloud_spend_against_onprem_tco_and_the_crossing(trio, fleet, client):
    from accounting.models import CloudTcoReading
    from accounting.periods import month_start

    now = timezone.now()
    CloudTcoReading.objects.create(tenant=trio.tenant, month=month_start(now), cloud_spend=Decimal("304.00"),
                                   onprem_tco=Decimal("100.00"), share_limit=0.65, crossed_at=now, checked_at=now)
    CloudTcoReading.objects.create(tenant=trio.other_tenant, month=month_start(now), cloud_spend=Decimal("30.00"),
                                   onprem_tco=Decimal("100.00"), share_limit=0.65, checked_at=now)
    last_month = CloudTcoReading.objects.create(tenant=trio.other_tenant, month=date(2000, 1, 1), checked_at=now,
                                                cloud_spend=Decimal("900"), onprem_tco=Decimal("1"), share_limit=0.65)
    got = scrape(client)
    assert got[("gpubroker_tenant_cloud_tco_share", (("tenant", "physics"),))] == 3.04
    assert got[("gpubroker_tenant_cloud_tco_share", (("tenant", "biology"),))] == 0.3
    assert got[("gpubroker_tenant_cloud_tco_crossed", (("action", "warn"), ("tenant", "physics")))] == 1
    assert got[("gpubroker_tenant_cloud_tco_crossed", (("action", "warn"), ("tenant", "biology")))] == 0
    assert last_month.share == 900 and 900 not in got.values()  # only this month's readings
