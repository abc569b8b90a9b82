"""Browser tests: Playwright for Python driving Debian's Chromium against pytest-django's
live server.

Nothing is downloaded: the browser is /usr/bin/chromium (CI installs it with apt-get,
see .ci/setup.d/browser.sh); without it the tests skip with the reason, and CI, which
lists ``browser`` in GPUBROKER_CI_REQUIRE, turns that skip into a failure.

The live server runs in threads of this process, so it shares the simulated fleet
with the test.  Background work (what the beat schedule does) is done by the test
itself between its looks at the page: ``Background.tick`` polls the clusters' status
(and may move the simulated clock) every ~0.3 s while ``wait_until`` waits for the page
to change on its own (htmx polling), never reloading it.  The ticks run on the test's
thread on purpose: on SQLite the live server shares the test's in-memory database
connection, and a second writer thread would fight it for the lock.
"""
from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

# the broker fixtures (simulated clusters, quota, submit/drive/poll), shared with tests/broker
from tests.broker.conftest import drive, gpu_classes, make_cluster, poll, quota, sim, submit  # noqa: F401
from tests.factories import PASSWORD

CHROMIUM = os.environ.get("GPUBROKER_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
DOWNLOADS = ROOT / "test-artifacts" / "downloads"
# the page tour writes here instead when GPUBROKER_UPDATE_SCREENSHOTS=1 (docs/pages.md shows them)
DOC_SCREENSHOTS = ROOT / "docs" / "screenshots"
UPDATE_DOC_SCREENSHOTS = os.environ.get("GPUBROKER_UPDATE_SCREENSHOTS", "") == "1"
# what site.css gives the header: proof that the stylesheet arrived and applies
HEADER_BACKGROUND = "rgb(16, 28, 46)"
BLOCKING_IMPACTS = ("serious", "critical")


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.browser)


def _live_server_through_whitenoise(addr: str):
    """pytest-django's live server with one difference: static files reach the portal's own
    middleware (WhiteNoise), as in ``make demo`` and under gunicorn, instead of the test
    static handler Django puts in front of the live server.  A stylesheet that only a test
    handler could serve would otherwise pass here and 404 in the demo."""
    from django.test.testcases import LiveServerThread
    from pytest_django.live_server_helper import LiveServer

    server = LiveServer(addr, start=False)
    old = server.thread
    server.thread = LiveServerThread(old.host, static_handler=lambda app: app,
                                     connections_override=old.connections_override, port=old.port)
    server.thread.daemon = True
    server.start()
    return server


@pytest.fixture(scope="session")
def live_server(request):
    addr = request.config.getvalue("liveserver") or os.getenv("DJANGO_LIVE_TEST_SERVER_ADDRESS") or "localhost"
    server = _live_server_through_whitenoise(addr)
    yield server
    server.stop()


@pytest.fixture
def chromium(transactional_db, monkeypatch):
    """Chromium for one test.  Function scope on purpose: while Playwright's sync API is
    started, an event loop runs in this thread, and Django refuses ORM calls under a
    running loop unless DJANGO_ALLOW_ASYNC_UNSAFE is set (set here, for this test only,
    so that the test may read and write between page actions).  The loop is gone again
    before the database is flushed and before any other test runs."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium); "
                    "Playwright's own browser downloads are never used")
    from django.db import connections
    from playwright.sync_api import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    # Once Playwright runs, this thread executes in another contextvars context, where
    # Django would open a second database connection for the test's own queries: never
    # closed (the test database could not be dropped) and, on SQLite, a second writer
    # beside the live server's.  Keep using the connections the fixtures used.
    shared = {alias: connections[alias] for alias in connections}
    with sync_playwright() as pw:
        for alias, conn in shared.items():
            connections[alias] = conn
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium, live_server, request):
    from playwright.sync_api import expect

    expect.set_options(timeout=15_000)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    context = chromium.new_context(base_url=live_server.url, accept_downloads=True,
                                   viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        shot(page, f"FAILED-{request.node.name}")
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.rep_call = report


def shot(page, name: str, *, doc: bool = False) -> Path:
    """Screenshot of the whole page: test-artifacts/screenshots/<name>.png, or, for a ``doc``
    screenshot while GPUBROKER_UPDATE_SCREENSHOTS=1, docs/screenshots/<name>.png."""
    folder = DOC_SCREENSHOTS if doc and UPDATE_DOC_SCREENSHOTS else SCREENSHOTS
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', name)}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def assert_assets_loaded(page) -> None:
    """The stylesheet applies (a computed style only site.css gives) and htmx runs."""
    header = page.evaluate("getComputedStyle(document.querySelector('header.top')).backgroundColor")
    assert header == HEADER_BACKGROUND, f"{page.url}: site.css did not apply (header background {header})"
    rules = page.evaluate("""[...document.styleSheets].filter(s => (s.href || '').endsWith('/static/portal/site.css'))
                             .map(s => s.cssRules.length)""")
    assert rules and rules[0] > 50, f"{page.url}: site.css missing or empty ({rules})"
    version = page.evaluate("window.htmx ? window.htmx.version : null")
    assert version and version.startswith("2."), f"{page.url}: htmx did not load ({version})"


def assert_accessible(page) -> None:
    """axe-core (pinned by axe-playwright-python) finds nothing serious or critical."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    blocking = [v for v in results.response["violations"] if v.get("impact") in BLOCKING_IMPACTS]
    problems = [f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes'][:3]]}"
                for v in blocking]
    assert not problems, f"{page.url}: accessibility violations:\n" + "\n".join(problems)


def log_in(page, user, password: str = PASSWORD, screenshot: str = "") -> None:
    page.goto("/login/")
    if screenshot:
        shot(page, screenshot)
    page.fill("#id_username", user.username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url)


def mark_page(page) -> None:
    """Tag the loaded document, so a later ``assert_not_reloaded`` can tell a reload."""
    page.evaluate("window.__gpubroker_no_reload = true")


def assert_not_reloaded(page) -> None:
    assert page.evaluate("window.__gpubroker_no_reload === true"), "the page was reloaded"


@dataclass
class Background:
    """What the beat schedule would do, done by the test: poll every cluster's status,
    optionally moving the simulated clock first."""

    clusters: list = field(default_factory=list)
    step_s: float = 0.0

    def tick(self) -> None:
        from broker.backends.sim import SimulatorFleet
        from broker.services.following.status import cluster_poll_status

        if self.step_s:
            SimulatorFleet.instance().advance(self.step_s)
        for cluster in self.clusters:
            cluster_poll_status(cluster_id=cluster.id)

    def wait_until(self, condition: Callable[[], bool], *, timeout: float = 20.0, every: float = 0.3,
                   what: str = "the page to change") -> None:
        """Tick every ``every`` seconds until ``condition()`` holds (the page changes by itself)."""
        deadline = time.monotonic() + timeout
        while True:
            self.tick()
            if condition():
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(every)


@pytest.fixture
def background() -> Background:
    return Background()
