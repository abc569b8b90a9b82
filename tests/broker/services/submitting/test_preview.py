"""Preview: placement of a spec now, reserving nothing, the same as a real submission."""
from __future__ import annotations

from decimal import Decimal

import pytest
from django.http import Http404
from django.utils import timezone

from broker.models import AuditRecord, GpuPool, Reservation, Workload
from broker.services.placing.cycle import workload_place
from broker.services.submitting.preview import workload_preview
from broker.services.quota.reservations import quota_use
from broker.spec import SpecError

SPEC = {"name": "look", "command": "python train.py", "gpu_class": "a100-80gb", "gpus_per_worker": 2,
        "workers": 2, "time_limit_minutes": 90}


def _state(trio, quota):
    pools = list(GpuPool.objects.order_by("id").values_list("id", "held_for", "nodes"))
    return (Workload.objects.count(), Reservation.objects.count(), AuditRecord.objects.count(), pools,
            quota_use(tenant_id=trio.tenant.id, gpu_class_id=quota.gpu_class_id))


def test_preview_reserves_nothing_and_matches_what_a_submission_gets_at_the_same_moment(
        trio, quota, make_cluster, submit):
    make_cluster("onprem", nodes=[8, 4])
    make_cluster("cloudy", location="cloud", price="3.5", nodes=[8, 8])
    now = timezone.now()
    before = _state(trio, quota)
    preview = workload_preview(user=trio.member, project_id=trio.project.id, spec_data=SPEC, now=now)
    assert _state(trio, quota) == before
    workload = workload_place(workload_id=submit(**SPEC).id, now=now)
    ranked = workload.placement["ranked"]
    assert [(d.cluster, d.pool, round(d.score, 6)) for d in preview.destinations] == [
        (c["cluster"], c["pool"], c["score"]) for c in ranked]
    assert workload.state == "reserved" and workload.cluster.name == preview.chosen.cluster
    assert workload.placement["chosen"]["pool"] == preview.chosen.pool
    assert preview.quota.remaining == 64 and preview.policy_version == workload.policy_version


def test_preview_states_expected_cost_start_and_quota_left(trio, quota, make_cluster):
    make_cluster("cloudy", location="cloud", price="3.5")
    now = timezone.now()
    preview = workload_preview(user=trio.member, project_id=trio.project.id, spec_data=SPEC, now=now)
    best = preview.chosen
    assert best.gpu_hours == 6.0  # 4 GPUs x 1.5 h (the time limit: no history yet)
    assert best.gpu_cost == Decimal("21.00") and best.expected_cost == Decimal("21.00")
    assert best.expected_start >= now and best.queue_wait_s == 0.0
    assert preview.quota.limit == 64 and not preview.warnings


def test_preview_warns_when_the_job_would_pass_the_tenants_cloud_budget(trio, quota, make_cluster):
    make_cluster("cloudy", location="cloud", price="3.5")
    trio.tenant.cloud_budget_month = Decimal("20.00")
    trio.tenant.save()
    preview = workload_preview(user=trio.member, project_id=trio.project.id, spec_data=SPEC)
    assert len(preview.warnings) == 1 and "monthly cloud budget of 20.00" in preview.warnings[0]


def test_preview_on_prem_only_does_not_warn_about_the_cloud_budget(trio, quota, make_cluster):
    make_cluster("onprem")
    trio.tenant.cloud_budget_month = Decimal("0.01")
    trio.tenant.save()
    preview = workload_preview(user=trio.member, project_id=trio.project.id, spec_data=SPEC)
    assert preview.chosen.cluster == "onprem" and not preview.warnings


def test_preview_over_quota_lists_no_destination_and_says_why(trio, quota, make_cluster):
    make_cluster("onprem")
    quota.limit_gpus = 2
    quota.save()
    preview = workload_preview(user=trio.member, project_id=trio.project.id, spec_data=SPEC)
    assert preview.destinations == [] and preview.excluded["onprem"]["rule"] == "quota"


def test_preview_bad_field_is_the_same_spec_error_as_a_submission(trio, quota, make_cluster, submit):
    make_cluster("onprem")
    with pytest.raises(SpecError) as previewed:
        workload_preview(user=trio.member, project_id=trio.project.id, spec_data={**SPEC, "workers": 0})
    with pytest.raises(SpecError) as submitted:
        submit(**{**SPEC, "workers": 0})
    assert previewed.value.errors == submitted.value.errors and "workers" in previewed.value.errors


def test_outsider_cannot_preview_into_another_tenants_project(trio, quota, make_cluster):
    make_cluster("onprem")
    with pytest.raises(Http404):
        workload_preview(user=trio.outsider, project_id=trio.project.id, spec_data=SPEC)


def test_when_nothing_fits_now_the_preview_names_the_queue_it_would_wait_in_and_when_it_would_start(
        trio, quota, make_cluster, sim, submit):
    from broker.services.fleet.inventory import cluster_sync_inventory  # noqa: PLC0415

    long_queue = make_cluster("long-queue", nodes=[8, 8], price="1.0")
    short_queue = make_cluster("short-queue", nodes=[8, 8], price="3.0")
    for name, extra in (("long-queue", 3), ("short-queue", 0)):
        for _ in range(2 + extra):
            sim.get(name).inject_foreign_job(gpus_per_worker=8, account="locals", duration_s=36000)
    sim.advance(60)
    for cluster in (long_queue, short_queue):
        cluster_sync_inventory(cluster_id=cluster.id)
    now = timezone.now()
    preview = workload_preview(user=trio.member, project_id=trio.project.id, spec_data=SPEC, now=now)
    assert preview.reason == "capacity" and preview.queued_after_s == 120.0
    assert [d.cluster for d in preview.destinations] == ["short-queue", "long-queue"]
    # 2 minutes at the broker, then 4 GPUs at an hour each over the 16 GPUs: 15 minutes
    assert preview.chosen.queue_wait_s == 120.0 + 900.0
    assert preview.chosen.expected_start >= now + timezone.timedelta(seconds=1020)
