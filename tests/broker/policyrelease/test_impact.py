"""The impact replay: the fleet's own last 30 days, under the active and the proposed
policy, through the trace replay's loop in a child process; figures per tenant."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from broker.fleet_file import load_demo_fleet
from broker.models import GpuClass, WorkloadState
from broker.policyrelease.history import current_fleet, recent_jobs
from broker.policyrelease.models import ImpactReplay, ImpactState
from broker.policyrelease.services.impact import impact_run
from broker.policyrelease.services.releases import release_propose
from broker.services.fleet.registration import clusters_from_fleet, gpu_classes_from_policy
from broker.services.fleet.policy import current_policy
from tests.broker.policyrelease.test_validation import GOOD
from tests.factories import ProjectFactory, TenantFactory, UserFactory, WorkloadFactory

pytestmark = pytest.mark.django_db(transaction=True)
CLOUD_FIRST = GOOD.replace("preset: on-prem-first", "preset: cloud-first")


@pytest.fixture
def history():
    current_policy()
    gpu_classes_from_policy()
    clusters_from_fleet(fleet=load_demo_fleet())
    a100 = GpuClass.objects.get(slug="a100-40gb")
    now = timezone.now()
    for slug in ("physics", "biology"):
        project = ProjectFactory(tenant=TenantFactory(slug=slug))
        for i in range(4):
            w = WorkloadFactory(project=project, gpu_class=a100, total_gpus=1, state=WorkloadState.COMPLETED,
                                run_seconds=1800.0)
            w.created_at = now - timedelta(days=2, minutes=-10 * i)
            w.save(update_fields=["created_at"])
    old = WorkloadFactory(project=project, gpu_class=a100)
    old.created_at = now - timedelta(days=40)
    old.save(update_fields=["created_at"])
    return now


def test_history_is_the_last_30_days_with_real_run_times(history):
    jobs = recent_jobs(now=history)
    assert len(jobs) == 8 and {j.tenant for j in jobs} == {"physics", "biology"}
    assert {j.duration_s for j in jobs} == {1800.0} and jobs[0].submit_s == 0.0
    assert set(current_fleet().names) == {c.name for c in load_demo_fleet().clusters}


def test_impact_replay_compares_active_and_proposed_per_tenant(history):
    proposer, owner = UserFactory(is_staff=True), UserFactory(is_staff=True)
    release = release_propose(actor=proposer, owner=owner, content=CLOUD_FIRST)
    from broker.policyrelease.models import PolicyRelease
    impact = ImpactReplay.objects.create(release=release, baseline=PolicyRelease.objects.get(number=1))
    impact = impact_run(impact_id=impact.id)
    assert impact.state == ImpactState.DONE, impact.message
    active, proposed = impact.result["active"], impact.result["proposed"]
    assert set(active) == set(proposed) == {"physics", "biology"}
    for tenant in ("physics", "biology"):
        assert active[tenant]["jobs"] == 4 and active[tenant]["failed_placements"] == 0
        assert active[tenant]["cloud_spend"] == 0 < proposed[tenant]["cloud_spend"]
        assert set(proposed[tenant]["gpu_hours"]) == {"cloud-k8s"}
        assert sum(proposed[tenant]["gpu_hours"].values()) == pytest.approx(2.0)
