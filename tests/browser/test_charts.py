"""Charts drawn in the browser by the vendored uPlot from the pages' JSON (no JavaScript errors:
the ``page`` fixture fails the test on any)."""
from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from accounting.services.rates import rate_set
from accounting.services.usage import usage_ingest
from portal.metrics.services.sampling import fleet_sample_take
from tests.accounting.helpers import usage
from tests.browser.conftest import log_in, shot
from tests.factories import ClusterFactory, GpuClassFactory, GpuPoolFactory, WorkloadFactory

pytestmark = pytest.mark.browser


def _history(trio) -> None:
    GpuClassFactory(slug="a100-80gb", gpu_models=["A100"], min_memory_gb=80)
    lab = ClusterFactory(name="lab")
    pool = GpuPoolFactory(cluster=lab, gpu_model="A100", gpu_memory_gb=80, gpus_total=16, gpus_allocatable=16)
    GpuPoolFactory(cluster=lab, name="mig", gpu_model="A100", gpu_memory_gb=80, partitioning="1g.10gb",
                   gpus_total=14, gpus_allocatable=14, gpus_idle=14)
    now = timezone.now()
    for step in range(12, -1, -1):
        busy = (12 - step) % 9
        type(pool).objects.filter(pk=pool.pk).update(gpus_allocated=busy, gpus_reserved=step % 3,
                                                     gpus_idle=16 - busy - step % 3)
        w = WorkloadFactory(project=trio.project, state="running", cluster=lab, total_gpus=1)
        type(w).objects.filter(pk=w.pk).update(created_at=now - timedelta(minutes=step * 10 + 5 + step),
                                               dispatched_at=now - timedelta(minutes=step * 10 + 1),
                                               started_at=now - timedelta(minutes=step * 10))
        fleet_sample_take(now=now - timedelta(minutes=step * 10))


def test_fleet_page_draws_its_history(transactional_db, trio, page):
    from playwright.sync_api import expect

    _history(trio)
    log_in(page, trio.member)
    page.goto("/fleet/")
    expect(page.locator("#chart-waits canvas")).to_have_count(1)
    expect(page.locator("#chart-capacity canvas")).to_have_count(2)  # whole GPUs, MIG slices apart
    expect(page.locator("#chart-capacity figcaption").first).to_contain_text("lab: GPUs by state")
    shot(page, "charts-fleet")


def test_chargeback_page_draws_spend_budget_tco_and_hours(transactional_db, trio, page):
    from playwright.sync_api import expect

    gpu_class = GpuClassFactory()
    cloud = ClusterFactory(name="aws-eu", location="cloud", price_per_gpu_hour=Decimal("4.00"))
    onprem = ClusterFactory(name="hpc", location="onprem")
    rate_set(gpu_class=gpu_class, price_per_gpu_hour=Decimal("2.00"), valid_from=date(2020, 1, 1))
    trio.tenant.cloud_budget_month = Decimal("50")
    trio.tenant.save()
    start = timezone.now().replace(day=1, hour=1, minute=0, second=0, microsecond=0)
    usage_ingest(cluster=onprem, records=[usage("1", gpus=8, seconds=7200, start=start)])
    usage_ingest(cluster=cloud, records=[usage("c1", cluster="aws-eu", source="kueue", gpus=4, seconds=3600,
                                                start=start)])
    log_in(page, trio.finance)
    page.goto("/accounting/chargeback/")
    expect(page.locator("#chart-spend canvas")).to_have_count(1)
    expect(page.locator("#chart-hours canvas")).to_have_count(1)
    expect(page.locator("#chart-spend")).to_contain_text("monthly budget")
    shot(page, "charts-chargeback")
