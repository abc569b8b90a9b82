"""The portal in a real browser (issue 8): a researcher follows a job live and cancels
another; an admin is refused a quota below use and raises it; finance exports a CSV
whose total is the page's total.  Every page visited is screenshotted into
test-artifacts/screenshots/."""
from __future__ import annotations

import csv
import io
import re
from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from broker.backends.base import JobState
from broker.models import Workload
from tests.browser.conftest import DOWNLOADS, assert_not_reloaded, log_in, mark_page, shot

pytestmark = pytest.mark.browser

FOREIGN_RUN_S = 600  # someone else's job holds the whole node this long (simulated seconds)


def _state(page) -> str:
    return (page.text_content("#workload-state") or "").strip()


def _reason(page) -> str:
    el = page.query_selector("#reason")
    return (el.text_content() or "").strip() if el else ""


# --- researcher ----------------------------------------------------------------------

def test_researcher_submits_follows_a_job_live_and_cancels_another(
        transactional_db, trio, quota, make_cluster, sim, submit, drive, page, background):
    from playwright.sync_api import expect

    cluster = make_cluster("onprem", nodes=[8, 8])  # Slurm: the gang's two workers take a node each
    # the nodes fill up after the broker's last inventory: the job is dispatched and waits there
    sim.get("onprem").inject_foreign_job(gpus_per_worker=8, workers=2, account="other", duration_s=FOREIGN_RUN_S)
    background.clusters = [cluster]

    log_in(page, trio.member, screenshot="researcher-00-login")
    shot(page, "researcher-01-home")
    page.click("header nav >> text=Submit")
    expect(page.locator("h1")).to_have_text("Submit a GPU job")
    expect(page.locator("[data-quota-left]")).to_have_text("64")
    page.fill("#id_name", "gang-of-two")
    page.fill("#id_command", "torchrun train.py")
    page.select_option("#id_gpu_class", "a100-80gb")
    page.fill("#id_gpus_per_worker", "2")
    page.fill("#id_workers", "2")
    shot(page, "researcher-02-submit-form")
    with page.expect_navigation(url=re.compile(r"/workloads/\d+/$")):
        page.click("#submit-form button[type=submit]")

    workload = Workload.objects.get(name="gang-of-two")
    assert page.url.endswith(f"/workloads/{workload.id}/")
    assert workload.total_gpus == 4 and workload.spec["workers"] == 2
    mark_page(page)

    # pending, with the reason in plain words and the scheduler's own text
    background.wait_until(lambda: _state(page) == "In the local queue" and "Waiting for GPUs" in _reason(page),
                          what="the job to show as queued with its reason")
    assert "Scheduler says:" in _reason(page)
    shot(page, "researcher-03-workload-pending")

    # the foreign job ends: the gang starts
    sim.advance(FOREIGN_RUN_S + 1)
    background.wait_until(lambda: _state(page) == "Running", what="the job to show as running")
    expect(page.locator("#reason")).to_have_count(0)
    shot(page, "researcher-04-workload-running")

    # it runs its course (half its 60-minute limit in the simulator)
    sim.advance(31 * 60)
    background.wait_until(lambda: _state(page) == "Completed", what="the job to show as completed")
    expect(page.locator("#cancel")).to_have_count(0)
    assert_not_reloaded(page)
    shot(page, "researcher-05-workload-completed")
    workload.refresh_from_db()
    assert workload.state == "completed"

    # another job, cancelled from its page
    other = drive(submit(name="to-cancel", gpus_per_worker=2))
    sim.advance(1)
    background.tick()
    page.click("header nav >> text=Workloads")
    expect(page.locator(f"tr[data-uid='{other.uid}'] [data-state]")).to_have_attribute("data-state", "running")
    expect(page.locator(f"tr[data-uid='{workload.uid}'] [data-state]")).to_have_attribute("data-state", "completed")
    shot(page, "researcher-06-workload-list")
    page.click(f"tr[data-uid='{other.uid}'] a")
    page.wait_for_url(f"**/workloads/{other.id}/")
    expect(page.locator("#workload-state")).to_have_text("Running")
    with page.expect_navigation():
        page.click("#cancel")
    assert page.url.endswith(f"/workloads/{other.id}/")
    expect(page.locator(".messages")).to_contain_text("Cancellation of to-cancel stored")
    mark_page(page)
    background.wait_until(lambda: _state(page) == "Cancelled", what="the cancellation to be confirmed")
    assert_not_reloaded(page)
    shot(page, "researcher-07-workload-cancelled")
    other.refresh_from_db()
    assert other.state == "cancelled"
    assert sim.get("onprem").job(other.destination_job_id).state is JobState.CANCELLED

    page.goto("/accounting/usage/")
    expect(page.locator("h1")).to_contain_text("GPU-hours of my projects")
    shot(page, "researcher-08-my-gpu-hours")


# --- admin ---------------------------------------------------------------------------

def test_admin_is_refused_a_quota_below_use_inline_then_raises_it(
        transactional_db, trio, quota, make_cluster, submit, drive, page):
    from playwright.sync_api import expect

    make_cluster("onprem")
    drive(submit(gpus_per_worker=2, workers=2))  # 4 GPUs reserved

    log_in(page, trio.owner)
    page.click("header nav >> text=Quotas")
    row = page.locator(f"#quota-{quota.id}")
    expect(row.locator("[data-used]")).to_have_text("4")
    shot(page, "admin-01-quotas")
    mark_page(page)

    row.locator("input[name=limit_gpus]").fill("3")
    row.locator("button[type=submit]").click()
    alert = page.locator(f"#quota-{quota.id} [role=alert]")
    expect(alert).to_contain_text("3 GPUs is below the 4 GPUs already reserved or running")
    assert page.url.endswith("/quotas/")
    assert_not_reloaded(page)
    shot(page, "admin-02-quota-refused")
    quota.refresh_from_db()
    assert quota.limit_gpus == 64

    row = page.locator(f"#quota-{quota.id}")
    row.locator("input[name=limit_gpus]").fill("80")
    row.locator("input[name=borrow_limit_gpus]").fill("8")
    row.locator("button[type=submit]").click()
    expect(page.locator(f"#quota-{quota.id} [role=alert]")).to_have_count(0)
    expect(page.locator(f"#quota-{quota.id} input[name=limit_gpus]")).to_have_value("80")
    assert_not_reloaded(page)
    shot(page, "admin-03-quota-raised")
    quota.refresh_from_db()
    assert (quota.limit_gpus, quota.borrow_limit_gpus) == (80, 8)

    for name, heading in (("Clusters", "Clusters"), ("Escalations", "Escalation queue"), ("Fleet", "Fleet overview")):
        page.click(f"header nav >> text={name}")
        expect(page.locator("h1")).to_have_text(heading)
        shot(page, f"admin-04-{name.lower()}")
    page.goto("/reservations/")
    expect(page.locator("h1")).to_have_text("Live reservations")
    shot(page, "admin-05-reservations")


# --- finance -------------------------------------------------------------------------

@pytest.fixture
def month_of_usage(trio, gpu_classes):
    """GPU-hours of both tenants in the current month, at 2.00 per A100 GPU-hour."""
    from accounting.services.rates import rate_set
    from accounting.services.usage import usage_ingest
    from broker.backends.base import UsageRecord
    from tests.factories import ClusterFactory, ProjectFactory

    ProjectFactory(tenant=trio.tenant, slug="qcd", slurm_account="qcd", k8s_namespace="qcd")
    rate_set(gpu_class=gpu_classes["a100-80gb"], price_per_gpu_hour=Decimal("2.00"), valid_from=date(2020, 1, 1))
    hpc = ClusterFactory(name="hpc", kind="slurm", location="onprem")
    end = timezone.now().replace(microsecond=0) - timedelta(minutes=5)
    records = [
        UsageRecord(source="slurm", cluster="hpc", job_id=str(i), workload_id=None, account=account,
                    gpu_model="a100", gpus=gpus, start=end - timedelta(seconds=secs), end=end,
                    gpu_seconds=gpus * secs, state="COMPLETED")
        for i, (account, gpus, secs) in enumerate([("lattice", 2, 3600), ("lattice", 8, 5400),
                                                    ("lattice", 1, 1800), ("qcd", 2, 3600),
                                                    ("genomes", 4, 7200)], start=1)]
    usage_ingest(cluster=hpc, records=records)
    return records


def test_finance_downloads_a_csv_whose_total_is_the_pages_total(transactional_db, trio, month_of_usage, page):
    from playwright.sync_api import expect

    log_in(page, trio.finance)
    page.click("header nav >> text=Chargeback")
    expect(page.locator("h1")).to_have_text("Chargeback")
    total = page.locator("#chargeback [data-total=cost]")
    expect(total).not_to_have_text("0.00")
    page_total = Decimal(total.text_content().strip())
    page_hours = Decimal(page.text_content("#chargeback [data-total=gpu_hours]").strip())
    # physics only: lattice (2 + 12 + 0.5) GPU-h + qcd 2 GPU-h, at 2.00
    assert (page_total, page_hours) == (Decimal("33.00"), Decimal("16.50"))
    assert "genomes" not in page.text_content("#chargeback")
    shot(page, "finance-01-chargeback")

    with page.expect_download() as info:
        page.click("text=Export CSV")
    download = info.value
    assert download.suggested_filename.startswith("chargeback-") and download.suggested_filename.endswith(".csv")
    text = open(download.path(), encoding="utf-8-sig").read()
    rows = list(csv.reader(io.StringIO(text)))
    header, totals = rows[0], rows[-1]
    assert totals[0] == "Total"
    assert Decimal(totals[header.index("Cost")]) == page_total
    assert Decimal(totals[header.index("GPU-hours")]) == page_hours
    assert sum(Decimal(r[header.index("Cost")]) for r in rows[1:-1]) == page_total
    assert {r[header.index("Project")] for r in rows[1:-1]} == {"lattice", "qcd"}
    (DOWNLOADS / download.suggested_filename).parent.mkdir(parents=True, exist_ok=True)
    download.save_as(str(DOWNLOADS / download.suggested_filename))

    for name, path in (("Reconciliation", "reconciliation"), ("Bills", "bills"), ("Rates", "rates")):
        page.click(f".subnav >> text={name}")
        page.wait_for_url(f"**/accounting/{path}/")
        expect(page.locator("h1")).to_be_visible()
        shot(page, f"finance-02-{name.lower()}")
