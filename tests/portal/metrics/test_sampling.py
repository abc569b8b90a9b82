"""The fleet sampler (beat schedule) and the chart selectors reading its history, scoped."""
from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from portal.metrics import selectors
from portal.metrics.models import CapacitySample, FigureSample
from portal.metrics.services.sampling import fleet_sample_take
from portal.metrics.tasks import sample_fleet
from tests.factories import ClusterFactory, GpuClassFactory, GpuPoolFactory, UserFactory, WorkloadFactory


@pytest.fixture
def fleet(trio):
    GpuClassFactory(slug="a100-80gb", gpu_models=["A100"], min_memory_gb=80)
    lab = ClusterFactory(name="lab")
    GpuPoolFactory(cluster=lab, name="gpu", gpu_model="A100", gpu_memory_gb=80, gpus_total=16,
                   gpus_allocatable=16, gpus_allocated=10, gpus_reserved=2, gpus_idle=4)
    GpuPoolFactory(cluster=lab, name="mig", gpu_model="A100", gpu_memory_gb=80, partitioning="1g.10gb",
                   gpus_total=14, gpus_allocatable=14, gpus_allocated=3, gpus_idle=11)
    cloud = ClusterFactory(name="cloud", location="cloud", price_per_gpu_hour=Decimal("4.00"))
    now = timezone.now()
    for project, wait_s in ((trio.project, 300), (trio.other_project, 30)):
        w = WorkloadFactory(project=project, state="running", cluster=cloud, total_gpus=1)
        type(w).objects.filter(pk=w.pk).update(created_at=now - timedelta(seconds=wait_s + 60),
                                               dispatched_at=now - timedelta(seconds=90),
                                               started_at=now - timedelta(seconds=60))
    WorkloadFactory(project=trio.project, state="waiting")
    return now


def test_a_sample_stores_capacity_per_cluster_class_and_resource_with_mig_apart(fleet):
    fleet_sample_take(now=fleet)
    rows = {(s.cluster, s.gpu_class, s.resource): (s.total, s.allocated, s.reserved, s.idle)
            for s in CapacitySample.objects.all()}
    assert rows == {("lab", "a100-80gb", "gpu"): (16, 10, 2, 4), ("lab", "a100-80gb", "mig-1g.10gb"): (14, 3, 0, 11)}


def test_a_sample_stores_each_tenants_queue_and_spend(trio, fleet):
    fleet_sample_take(now=fleet)
    mine = FigureSample.objects.get(tenant=trio.tenant)
    theirs = FigureSample.objects.get(tenant=trio.other_tenant)
    assert (mine.queue_depth, mine.started, mine.queue_wait_p95_s, mine.time_to_first_gpu_p95_s) == (1, 1, 300, 30)
    assert (theirs.queue_depth, theirs.queue_wait_p95_s) == (0, 30)
    assert Decimal("0") < mine.cloud_spend_month <= Decimal("0.07")  # 1 GPU x <= 60 s x 4.00/h


def test_the_beat_task_samples_and_old_samples_are_pruned(trio, fleet, settings):
    settings.GPUBROKER_SAMPLE_KEEP_DAYS = 30
    fleet_sample_take(now=fleet - timedelta(days=31))
    sample_fleet.delay()
    assert CapacitySample.objects.filter(taken_at__lt=fleet - timedelta(days=30)).count() == 0
    assert CapacitySample.objects.count() == 2 and FigureSample.objects.count() == 2


def test_history_is_read_back_from_the_table_after_a_restart(trio, fleet):
    for minutes in (10, 5, 0):
        fleet_sample_take(now=fleet - timedelta(minutes=minutes))
    charts = selectors.capacity_history(user=trio.member, now=fleet)
    whole = next(c for c in charts if c["resource"] == "gpu")
    assert len(whole["t"]) == 3 and whole["allocated"] == [10, 10, 10] and whole["idle"] == [4, 4, 4]
    assert next(c for c in charts if c["resource"] == "mig-1g.10gb")["total"] == [14, 14, 14]


def test_wait_history_shows_only_the_users_tenants(trio, fleet):
    fleet_sample_take(now=fleet)
    assert [s["tenant"] for s in selectors.wait_history(user=trio.member, now=fleet)] == ["physics"]
    outsider = selectors.wait_history(user=trio.outsider, now=fleet)
    assert [s["tenant"] for s in outsider] == ["biology"] and outsider[0]["queue_wait_p95_s"] == [30]


def test_no_membership_sees_no_history(trio, fleet):
    fleet_sample_take(now=fleet)
    stranger = UserFactory(username="stranger")
    assert selectors.fleet_charts(user=stranger) == {"capacity": [], "waits": []}


def test_spend_history_sums_only_the_given_tenants(trio, fleet):
    fleet_sample_take(now=fleet)
    mine = selectors.spend_history(tenant_ids={trio.tenant.id}, since=fleet - timedelta(hours=1),
                                   until=fleet + timedelta(hours=1))
    both = selectors.spend_history(tenant_ids=None, since=fleet - timedelta(hours=1), until=fleet + timedelta(hours=1))
    assert len(mine["t"]) == 1 and 0 < mine["spend"][0] < both["spend"][0]


def test_cloud_spend_counts_the_run_time_the_cluster_reports(trio, fleet):
    # a simulated cluster runs faster than wall time: its reported run time is what was used
    from broker.models import Workload

    Workload.objects.filter(tenant=trio.tenant, cluster__name="cloud").update(run_seconds=3600.0)
    fleet_sample_take(now=fleet)
    assert FigureSample.objects.get(tenant=trio.tenant).cloud_spend_month == Decimal("4.00")  # 1 GPU x 1 h x 4.00


def test_shares_and_slices_are_resources_of_their_own_never_gpus():
    from portal.metrics.readings import resource_of  # noqa: PLC0415

    assert [resource_of(p) for p in ("whole", "1g.10gb", "time-slicing", "shard")] == [
        "gpu", "mig-1g.10gb", "shares-time-slicing", "shares-shard"]
