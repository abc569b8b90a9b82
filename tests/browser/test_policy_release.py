"""A policy release end to end in a browser: propose a version that raises the cloud
weight, see the impact replay's table, approval refused for the proposer and accepted
for the owner, placements after activation carry the new version, rollback restores
the old one."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from broker.fleet_file import build_simulated_clusters, load_demo_fleet
from broker.models import Cluster, GpuClass, WorkloadState
from broker.policyrelease.models import PolicyRelease
from broker.services.fleet.registration import clusters_from_fleet
from broker.services.fleet.inventory import cluster_sync_inventory
from broker.services.fleet.policy import current_policy
from tests.browser.conftest import log_in, shot
from tests.factories import UserFactory, WorkloadFactory

pytestmark = pytest.mark.browser


@pytest.fixture
def fleet_with_history(transactional_db, trio, gpu_classes, sim):
    fleet = load_demo_fleet()
    build_simulated_clusters(fleet, sim)
    for cluster in clusters_from_fleet(fleet=fleet):
        cluster_sync_inventory(cluster_id=cluster.id)
    now = timezone.now()
    for i in range(6):
        w = WorkloadFactory(project=trio.project, gpu_class=GpuClass.objects.get(slug="a100-40gb"), total_gpus=1,
                            state=WorkloadState.COMPLETED, run_seconds=3600.0)
        w.created_at = now - timedelta(days=3, minutes=-5 * i)
        w.save(update_fields=["created_at"])


def _logout(page) -> None:
    page.click("form[action='/logout/'] button")
    page.wait_for_url(lambda url: "/login/" in url)


def test_policy_release_end_to_end(fleet_with_history, trio, quota, submit, drive, page):
    from playwright.sync_api import expect

    old = current_policy()
    alice = UserFactory(username="alice", is_staff=True)
    bob = UserFactory(username="bob", is_staff=True)

    log_in(page, alice)
    page.goto("/policy/new/")
    text = page.input_value("#id_content")
    cloudier = text.replace("preset: on-prem-first", "preset: cloud-first").replace("weights: {}",
                                                                                      "weights: {location: 8.0}")
    page.fill("#id_content", cloudier.replace("staleness_limit_s: 300", "staleness_limit_s: soon"))
    page.select_option("#id_owner", label="bob")
    page.click("button[name=preview]")
    expect(page.locator("[role=alert]")).to_contain_text("staleness_limit_s")
    expect(page.locator("[role=alert]")).to_contain_text("Line ")
    page.fill("#id_content", cloudier)
    page.fill("#id_summary", "raise the cloud weight")
    page.click("button[name=preview]")
    expect(page.locator("pre.diff ins").first).to_be_visible()
    shot(page, "policy-propose")
    page.click("button:text-is('Propose')")
    expect(page.locator("#release-state")).to_have_text("Proposed")

    page.click("button:has-text('Replay the last 30 days')")
    expect(page.locator("#impact-table")).to_be_visible(timeout=240_000)
    row = page.locator("#impact-table tr[data-tenant='physics']")
    expect(row).to_be_visible()
    shot(page, "policy-impact")
    spend = row.locator("td.spend").text_content()
    assert spend.startswith("0.00 → ") and not spend.endswith("→ 0.00"), spend

    page.click("button:text-is('Approve')")
    expect(page.locator("[role=alert]")).to_contain_text("only its owner (bob) may approve")
    _logout(page)

    log_in(page, bob)
    release = PolicyRelease.objects.get(number=2)
    page.goto(f"/policy/{release.id}/")
    page.click("button:text-is('Approve')")
    expect(page.locator("#release-state")).to_have_text("Approved")
    page.click("button:text-is('Activate')")
    expect(page.locator("#release-state")).to_have_text("Active")

    after = drive(submit(gpus_per_worker=1, name="after"))
    assert after.policy_version == release.version != old.version
    assert Cluster.objects.get(id=after.cluster_id).location == "cloud"

    page.goto("/policy/")
    page.click("button:text-is('Roll back to v1')")
    expect(page.locator("#release-state")).to_have_text("Active")
    shot(page, "policy-rolled-back")
    back = drive(submit(gpus_per_worker=1, name="back"))
    assert back.policy_version == old.version
