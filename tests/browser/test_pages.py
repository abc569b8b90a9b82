"""Every page each role can open, in a real browser, on the demo's own settings (debug off,
static files through WhiteNoise): the stylesheet applies and htmx runs, axe-core finds no
serious or critical accessibility problem, and the page is screenshotted (with
GPUBROKER_UPDATE_SCREENSHOTS=1 into docs/screenshots/, which docs/pages.md shows).

The data is the demo's: ``demo_seed`` (its users, tenants, projects and the three simulated
clusters of broker/fleets/demo.yaml) plus a morning of work on them."""
from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone

from broker.models import Cluster, Workload
from portal.pages.nav import links_for
from tests.browser.conftest import (
    DOC_SCREENSHOTS, UPDATE_DOC_SCREENSHOTS, assert_accessible, assert_assets_loaded,
    assert_not_reloaded, log_in, mark_page, shot,
)

pytestmark = pytest.mark.browser

PASSWORDS = {"researcher": "researcher-demo", "admin": "admin-demo", "finance": "finance-demo"}
TIME_SCALE = 240.0  # a 20-minute job (it runs half its limit) ends in 2.5 s


def _spec(name: str, gpu_class: str = "a100-80gb", gpus: int = 1, workers: int = 1, minutes: int = 60) -> dict:
    return {"name": name, "command": "torchrun train.py", "gpu_class": gpu_class, "gpus_per_worker": gpus,
            "workers": workers, "time_limit_minutes": minutes}


class DemoWorld:
    """The demo fleet after a morning of work: finished, running, waiting and cancelled jobs,
    usage and a reconciliation, an unexplained job to escalate, fleet samples for the charts."""

    def __init__(self):
        from broker.backends.sim import SimClock, SimulatorFleet
        from broker.fleet_file import build_simulated_clusters, load_fleet
        from demo.seed import demo_seed
        from broker.services.fleet.inventory import cluster_sync_inventory

        demo_seed()
        # the demo's kind of clock: simulated time is the broker's wall time and jobs run
        # TIME_SCALE times faster, so every time on the pages is consistent ("2 s ago")
        self.fleet = SimulatorFleet.reset(clock=SimClock(follow_wall=True, time_scale=TIME_SCALE))
        build_simulated_clusters(load_fleet(settings.GPUBROKER_FLEET_FILE), self.fleet)
        self.clusters = list(Cluster.objects.order_by("name"))
        for cluster in self.clusters:
            cluster_sync_inventory(cluster_id=cluster.id)
        users = get_user_model().objects.in_bulk(PASSWORDS, field_name="username")
        self.researcher, self.admin, self.finance = (users[n] for n in PASSWORDS)

    def submit(self, spec: dict) -> Workload:
        from broker.services.submitting.workloads import workload_submit
        from portal.tenancy.models import Project

        project = Project.objects.get(slug="lattice-qcd")
        return workload_submit(user=self.researcher, project_id=project.id, spec_data=spec)

    def tick(self, seconds: float = 0.0) -> None:
        """Let ``seconds`` of simulated time pass, then do what the beat schedule does:
        status, then inventory."""
        from broker.services.fleet.inventory import cluster_sync_inventory
        from broker.services.following.status import cluster_poll_status

        time.sleep(seconds / TIME_SCALE)
        for cluster in self.clusters:
            cluster_poll_status(cluster_id=cluster.id)
            cluster_sync_inventory(cluster_id=cluster.id)

    def morning(self) -> "DemoWorld":
        from accounting.periods import this_month
        from accounting.services.reconciliation import reconciliation_run_all
        from accounting.services.usage import usage_collect
        from broker.services.following.reconcile import reconcile_fleet
        from broker.services.submitting.workloads import workload_cancel
        from portal.metrics.services.sampling import fleet_sample_take

        now = timezone.now()
        self.submit(_spec("resnet50-baseline", gpus=2, minutes=20))
        self.submit(_spec("bert-eval", gpu_class="a100-40gb", minutes=20))
        self.submit(_spec("h100-smoke-test", gpu_class="h100", gpus=2, minutes=20))  # only the cloud has H100s
        fleet_sample_take(now=now - timedelta(minutes=50))
        self.tick(15 * 60)  # they finish (the simulator runs a job half its limit by default)
        fleet_sample_take(now=now - timedelta(minutes=40))
        self.submit(_spec("llama-finetune", gpus=8, workers=2, minutes=7 * 24 * 60))  # runs all along
        self.submit(_spec("vit-sweep-07", gpu_class="a100-40gb", gpus=2, minutes=2880))
        cancelled = self.submit(_spec("protein-embed", gpus=4, minutes=90))
        self.tick(60)
        fleet_sample_take(now=now - timedelta(minutes=30))
        workload_cancel(user=self.researcher, workload_id=cancelled.id)
        self.submit(_spec("mixtral-pretrain", gpus=8, workers=4, minutes=600))  # more than the quota left
        self.tick(60)
        fleet_sample_take(now=now - timedelta(minutes=20))
        # a job with the broker's marker its database does not know: reconciliation escalates it
        self.fleet.get("onprem-slurm").inject_foreign_job(gpus_per_worker=4, account="unknown", duration_s=10 * 86400, workload_id="wl-lost")
        reconcile_fleet()
        self.tick()
        for cluster in self.clusters:
            usage_collect(cluster_id=cluster.id)
        self.books()
        reconciliation_run_all(period=this_month(), actor=self.admin)
        fleet_sample_take(now=now - timedelta(minutes=10))
        fleet_sample_take(now=now)
        return self


    def books(self) -> None:
        """An on-prem rate worked out from TCO, and last month's cloud bill."""
        from decimal import Decimal

        from accounting.services.bills import bill_import
        from accounting.services.rates import TcoInputs, rate_set_from_tco
        from broker.models import GpuClass
        from portal.tenancy.models import Tenant

        tco = TcoInputs(hardware_cost=Decimal("1400000"), life_years=Decimal("5"), power_kw=Decimal("42"),
                        price_per_kwh=Decimal("0.21"), support_per_year=Decimal("60000"),
                        staff_per_year=Decimal("90000"), gpus=32, utilisation=Decimal("0.7"))
        rate_set_from_tco(gpu_class=GpuClass.objects.get(slug="a100-80gb"), tco=tco,
                          valid_from=timezone.now().date().replace(month=1, day=1), actor=self.admin)
        bill = Path(settings.BASE_DIR) / "tests" / "accounting" / "fixtures" / "aws_cur.csv"
        with bill.open("rb") as content:
            self.bill_id = bill_import(provider="aws", file_name="aws-cur-2026-11.csv", content=content,
                        tenant=Tenant.objects.get(slug="physics"), cluster=Cluster.objects.get(name="cloud-k8s"),
                        actor=self.admin).bill.id


@pytest.fixture
def demo(transactional_db) -> DemoWorld:
    return DemoWorld().morning()


def _check(page, name: str) -> None:
    """The page as a user meets it: its heading, its stylesheet and htmx, no serious
    accessibility problem; then its screenshot for the docs."""
    from playwright.sync_api import expect

    expect(page.locator("h1")).to_be_visible()
    assert_assets_loaded(page)
    assert_accessible(page)
    shot(page, name, doc=True)


def _tour(page, user, role: str, extra: list[tuple[str, str]]) -> list[str]:
    """Log in, then open every page the navigation offers by clicking it, then ``extra``."""
    from playwright.sync_api import expect

    log_in(page, user, PASSWORDS[role])
    _check(page, f"{role}-home")
    offered = page.eval_on_selector_all("nav.primary a", "els => els.map(e => e.getAttribute('href'))")
    assert offered == [link.url for link in links_for(user=user)]
    for href in offered:
        page.locator(f'nav.primary a[href="{href}"]').click()
        page.wait_for_url(f"**{href}")
        expect(page.locator(f'nav.primary a[href="{href}"]')).to_have_attribute("aria-current", "page")
        _check(page, f"{role}-{href.strip('/').replace('/', '-')}")
    for href, name in extra:
        page.goto(href)
        _check(page, f"{role}-{name}")
    return offered


def test_researcher_pages_load_styled_live_and_accessible(demo, page):
    workload = Workload.objects.get(name="llama-finetune")
    offered = _tour(page, demo.researcher, "researcher",
                    [("/accounting/", "accounting"), (f"/workloads/{workload.id}/", "workload-detail"),
                     (f"/workloads/{workload.id}/logs/", "workload-logs"), ("/account/tokens/", "api-tokens")])
    assert {"/workloads/new/", "/workloads/", "/clusters/", "/fleet/", "/accounting/usage/"} <= set(offered)


def test_admin_pages_load_styled_live_and_accessible(demo, page):
    workload = Workload.objects.get(name="mixtral-pretrain")
    offered = _tour(page, demo.admin, "admin",
                    [("/accounting/", "accounting"), (f"/workloads/{workload.id}/", "workload-detail"),
                     ("/account/tokens/", "api-tokens")])
    assert {"/quotas/", "/reservations/", "/escalations/", "/clusters/", "/fleet/"} <= set(offered)


def test_finance_pages_load_styled_live_and_accessible(demo, page):
    bill = demo.bill_id
    offered = _tour(page, demo.finance, "finance", [("/accounting/", "accounting"),
                                                     (f"/accounting/bills/{bill}/", "accounting-bill-detail"),
                                                     ("/account/tokens/", "api-tokens")])
    assert {"/accounting/chargeback/", "/accounting/reconciliation/", "/accounting/bills/",
            "/accounting/rates/"} <= set(offered)


def test_login_page_loads_styled_and_accessible(transactional_db, page):
    page.goto("/login/")
    _check(page, "login")


def test_an_admin_cuts_a_cluster_off_and_sees_it_stale_not_idle(demo, page):
    from playwright.sync_api import expect

    log_in(page, demo.admin, PASSWORDS["admin"])
    page.goto("/clusters/")
    card = page.locator("[data-cluster='cloud-k8s']")
    expect(card.locator("[data-health]")).to_have_attribute("data-health", "healthy")
    idle_before = card.locator("tbody tr td.num").nth(4).text_content()
    card.locator("button[data-outage=start]").click()
    page.wait_for_url("**/clusters/#cluster-cloud-k8s")
    card = page.locator("[data-cluster='cloud-k8s']")
    expect(card.locator("[data-health]")).to_have_attribute("data-health", "stale")
    expect(card).to_contain_text("stale: no new placements")
    # its last numbers stay, shown as a last report and not as idle GPUs
    assert card.locator("tbody tr td.num").nth(4).text_content().strip("() ") == idle_before.strip()
    expect(page.locator(".messages")).to_contain_text("cloud-k8s is now unreachable")
    _check(page, "admin-clusters-outage")
    card.locator("button[data-outage=end]").click()
    page.wait_for_url("**/clusters/#cluster-cloud-k8s")
    expect(page.locator("[data-cluster='cloud-k8s'] [data-health]")).to_have_attribute("data-health", "healthy")


def test_the_workload_list_refreshes_live(demo, page):
    """A state change shows in the list by itself (htmx polling), without a reload."""
    from playwright.sync_api import expect

    job = demo.submit(_spec("short-eval", gpus=1, minutes=20))
    demo.tick()
    job.refresh_from_db()
    assert job.state in ("queued", "running"), job.state
    log_in(page, demo.researcher, PASSWORDS["researcher"])
    page.goto("/workloads/")
    state = page.locator(f"tr[data-uid='{job.uid}'] [data-state]")
    expect(state).to_have_attribute("data-state", job.state)
    mark_page(page)
    demo.tick(15 * 60)  # the simulator runs it half its limit: it completes; the page is not touched
    job.refresh_from_db()
    assert job.state == "completed"
    expect(state).to_have_attribute("data-state", "completed", timeout=20_000)
    expect(state).to_have_text("Completed")
    assert_not_reloaded(page)


@pytest.mark.skipif(UPDATE_DOC_SCREENSHOTS, reason="the screenshots are being rewritten")
def test_docs_show_a_committed_screenshot_of_every_page():
    shown = (Path(settings.BASE_DIR) / "docs" / "pages.md").read_text()
    for png in sorted(DOC_SCREENSHOTS.glob("*.png")):
        assert f"screenshots/{png.name}" in shown, f"docs/pages.md does not show {png.name}"
    for role in PASSWORDS:
        assert (DOC_SCREENSHOTS / f"{role}-home.png").exists(), role


def test_the_api_docs_page_draws_the_api_without_reaching_another_host(trio, page, live_server):
    from playwright.sync_api import expect

    elsewhere: list[str] = []
    page.on("request", lambda r: None if r.url.startswith(live_server.url) else elsewhere.append(r.url))
    log_in(page, trio.member)
    page.goto("/api/v1/docs/")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("GPU broker API")
    expect(page.locator(".swagger-ui").get_by_text("/api/v1/workloads/", exact=True).first).to_be_visible()
    shot(page, "api-docs")
    assert elsewhere == []
