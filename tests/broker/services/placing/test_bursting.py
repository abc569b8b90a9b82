"""Spend-aware bursting: the cloud only when on-prem is predicted to be slow and the
tenant's monthly cloud budget allows; the first prediction kept for the estimator's error."""
from __future__ import annotations

from decimal import Decimal

import pytest
from django.utils import timezone

from accounting.models import CloudTcoReading
from accounting.periods import month_start
from broker.models import Quota
from broker.services.fleet.inventory import cluster_sync_inventory
from broker.services.fleet.policy import current_policy, policy_override


def _with_burst(text: str) -> str:
    return current_policy().text + "\nburst:\n" + text


@pytest.fixture
def onprem_full_cloud_free(make_cluster, sim, submit, drive, poll):
    """On-prem has started a job of ours (the estimator's one observation) and is then
    filled by someone else; the cloud is idle."""
    onprem = make_cluster("onprem", nodes=[8])
    first = drive(submit(name="first", gpus_per_worker=2))
    poll(onprem)
    first.refresh_from_db()
    assert first.state == "running" and first.started_at is not None
    sim.get("onprem").inject_foreign_job(gpus_per_worker=6, account="other", duration_s=3600)
    cluster_sync_inventory(cluster_id=onprem.id)
    cloud = make_cluster("cloud", nodes=[8], location="cloud", price="4.1", region="eu-central")
    return onprem, cloud


def test_without_a_burst_rule_a_job_that_fits_only_in_the_cloud_goes_there(onprem_full_cloud_free, submit, drive):
    workload = drive(submit(gpus_per_worker=4))
    assert workload.cluster.name == "cloud"
    assert workload.placement["predicted_wait_s"] is not None


def test_a_short_predicted_on_prem_wait_keeps_the_job_off_the_cloud(onprem_full_cloud_free, submit, drive):
    with policy_override(_with_burst("  min_onprem_wait_s: 3600\n")):
        workload = drive(submit(gpus_per_worker=4))
    assert workload.state == "waiting"
    assert "burst threshold of 60 min" in workload.raw_reason
    assert workload.placement["burst"] == workload.raw_reason
    assert 0 < workload.placement["onprem_wait_s"] < 3600


def test_a_long_predicted_on_prem_wait_lets_the_job_burst(onprem_full_cloud_free, submit, drive):
    with policy_override(_with_burst("  min_onprem_wait_s: 1\n")):
        workload = drive(submit(gpus_per_worker=4))
    assert workload.cluster.name == "cloud" and workload.placement["onprem_wait_s"] > 1


def test_a_spent_cloud_budget_keeps_the_job_off_the_cloud(onprem_full_cloud_free, submit, drive, trio):
    trio.tenant.cloud_budget_month = Decimal("1.00")  # the job alone would cost more
    trio.tenant.save(update_fields=["cloud_budget_month"])
    workload = drive(submit(gpus_per_worker=4))
    assert workload.state == "waiting" and "cloud budget" in workload.raw_reason


def test_the_burst_rule_never_holds_back_an_on_prem_placement(make_cluster, submit, drive):
    make_cluster("onprem", nodes=[8])
    make_cluster("cloud", nodes=[8], location="cloud", price="4.1", region="eu-central")
    with policy_override(_with_burst("  min_onprem_wait_s: 604800\n")):
        workload = drive(submit(gpus_per_worker=4))
    assert workload.cluster.name == "onprem" and workload.placement["burst"] == ""


def test_burst_threshold_doubles_once_cloud_spend_reaches_the_tco_reassessment_share():
    from broker.placement.burst import Burst, cloud_verdict, reassess_due  # noqa: PLC0415
    rule = Burst(min_onprem_wait_s=1800, reassess_share=0.65)
    assert not reassess_due(rule, cloud_spend=600, onprem_tco=1000)
    assert reassess_due(rule, cloud_spend=650, onprem_tco=1000)
    wait = 2700  # 45 min: past the threshold, not past twice it
    assert cloud_verdict(rule, onprem_wait_s=wait, gpu_cost=10, budget=None, spent=0).allowed
    held = cloud_verdict(rule, onprem_wait_s=wait, gpu_cost=10, budget=None, spent=0, reassess=True)
    assert not held.allowed and "doubled" in held.reason


def test_egress_uplift_counts_against_the_budget():
    from broker.placement.burst import Burst, cloud_verdict  # noqa: PLC0415
    rule = Burst(egress_uplift=0.3)
    assert cloud_verdict(rule, onprem_wait_s=None, gpu_cost=100, budget=130, spent=0).allowed
    assert not cloud_verdict(rule, onprem_wait_s=None, gpu_cost=100, budget=129, spent=0).allowed


def test_past_the_tco_share_the_tenant_bursts_on_when_the_policy_warns_and_not_when_it_stops(
        onprem_full_cloud_free, submit, drive, trio, gpu_classes):
    Quota.objects.create(tenant=trio.other_tenant, gpu_class=gpu_classes["a100-80gb"], limit_gpus=64)
    now = timezone.now()
    CloudTcoReading.objects.create(tenant=trio.tenant, month=month_start(now), cloud_spend=Decimal("304.00"),
                                   onprem_tco=Decimal("100.00"), share_limit=0.65, crossed_at=now, checked_at=now)
    warned = drive(submit(name="warned", gpus_per_worker=4))
    assert warned.cluster.name == "cloud"  # burst.over_tco: warn (the default)
    with policy_override(_with_burst("  over_tco: stop\n")):
        stopped = drive(submit(name="stopped", gpus_per_worker=4))
        other_tenant = drive(submit(name="theirs", gpus_per_worker=2, user=trio.outsider,
                                    project=trio.other_project))
    assert stopped.state == "waiting"
    assert "is 304.00, 304% of what the same GPU-hours cost on-prem at TCO rates (100.00)" in stopped.raw_reason
    assert "new cloud placements for the tenant stop until the month ends" in stopped.raw_reason
    assert other_tenant.cluster.name == "cloud"  # only the tenant past its share stops
