"""Placement in passes: ``place_waiting`` prepares the fleet once and shares it with every
waiting workload of the pass (booking what each one takes), its reads do not grow with
the number of workloads or clusters, and a workload that found no place pauses before the
next pass looks at it again (doubling, capped)."""
from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from broker import tasks
from broker.models import Cluster, Workload
from broker.services.fleet.inventory import cluster_sync_inventory
from broker.services.placing import bursting
from broker.services.placing.cycle import RETRY_CAP_S, waiting_place_pass, workload_place


def _queries(now):
    bursting._cache.clear()  # each measured pass learns the waits afresh: the same reads every time
    with CaptureQueriesContext(connection) as seen:
        report = waiting_place_pass(now=now)
    return len(seen), report


def _reads(now) -> int:
    bursting._cache.clear()
    with CaptureQueriesContext(connection) as seen:
        waiting_place_pass(now=now)
    return sum(q["sql"].lstrip().upper().startswith("SELECT") for q in seen.captured_queries)


@pytest.fixture
def starved(quota):
    """A quota too small for any of the workloads below: each pass leaves them waiting."""
    quota.limit_gpus = 1
    quota.save()
    return quota


def test_one_pass_books_what_each_workload_takes_so_none_is_double_booked(trio, quota, make_cluster, submit):
    make_cluster("onprem", nodes=[8, 8])
    jobs = [submit(name=f"job{i}", gpus_per_worker=8) for i in range(3)]
    report = waiting_place_pass()
    states = [Workload.objects.get(id=j.id).state for j in jobs]
    assert states == ["reserved", "reserved", "waiting"] and report.placed == 2
    nodes = [Workload.objects.get(id=j.id).placement["chosen"]["assignment"] for j in jobs[:2]]
    assert nodes[0] != nodes[1]  # the second went to the other node, not onto the first's GPUs


def test_the_beat_task_runs_one_pass(trio, quota, make_cluster, submit):
    make_cluster("onprem")
    job = submit()
    tasks.place_waiting()
    assert Workload.objects.get(id=job.id).state == "reserved"


def test_the_reads_of_a_pass_do_not_grow_with_the_number_of_clusters(trio, starved, make_cluster, submit):
    make_cluster("one")
    for i in range(3):
        submit(name=f"a{i}")
    few, _ = _queries(timezone.now())
    Workload.objects.all().delete()
    for name in ("two", "three", "four", "five"):
        make_cluster(name)
    for i in range(3):
        submit(name=f"b{i}")
    many, report = _queries(timezone.now())
    assert report.due == 3 and few == many


def test_a_pass_costs_a_fixed_number_of_reads_plus_each_workloads_own_writes(
        trio, starved, make_cluster, submit, django_assert_max_num_queries):
    for name in ("one", "two", "three"):
        make_cluster(name)
    counts, reads = [], []
    for n in (2, 4, 6):
        Workload.objects.all().delete()
        for i in range(n):
            submit(name=f"w{n}-{i}")
        counts.append(_queries(timezone.now())[0])
        Workload.objects.update(placement={})  # due again, as new
        reads.append(_reads(timezone.now()))
    # the reads, the same for 2, 4 or 6 workloads: the queue; the policy, pools, clusters, promised
    # GPUs, holds (2), learned waits (2); the due workloads; quota, reservations, run times of the one project
    assert reads[0] == reads[1] == reads[2] <= 13
    per_workload = (counts[1] - counts[0]) // 2
    assert counts[2] - counts[1] == counts[1] - counts[0] == 2 * per_workload  # a straight line
    fixed = counts[0] - 2 * per_workload
    # each waiting workload: its UPDATE and audit INSERT in (nested) transactions; no read
    assert per_workload <= 6 and fixed <= 13, (fixed, per_workload)
    Workload.objects.all().delete()
    for i in range(20):
        submit(name=f"many{i}")
    bursting._cache.clear()
    with django_assert_max_num_queries(fixed + 20 * per_workload):
        assert waiting_place_pass().due == 20


def test_a_pass_right_after_reads_only_the_queue_the_last_capacity_change_and_the_policy_while_all_pause(
        trio, starved, make_cluster, submit, django_assert_max_num_queries):
    make_cluster("onprem")
    for i in range(8):
        submit(name=f"w{i}")
    now = timezone.now()
    assert waiting_place_pass(now=now).due == 8
    with django_assert_max_num_queries(3):
        report = waiting_place_pass(now=now + timedelta(seconds=5))
    assert (report.due, report.pausing) == (0, 8)


def test_each_fruitless_try_doubles_the_pause_up_to_the_cap(trio, starved, make_cluster, submit):
    from broker.services.fleet.policy import current_policy, policy_override  # noqa: PLC0415

    make_cluster("onprem")
    job = submit()
    # (crossing the queue-after age is a look of its own: the next test)
    with policy_override(current_policy().text.replace("queue_after_s: 120", "queue_after_s: null")):
        _pauses_double(job, timezone.now())


def test_crossing_the_queue_after_age_makes_a_pausing_job_due_once(trio, starved, make_cluster, submit):
    make_cluster("onprem")
    job = submit()
    created = Workload.objects.get(id=job.id).created_at
    for at_s in (0, 10, 30, 70):  # fruitless looks: the pause doubles to 80 s, to 150 s
        assert waiting_place_pass(now=created + timedelta(seconds=at_s)).due == 1
    assert waiting_place_pass(now=created + timedelta(seconds=119)).due == 0
    assert waiting_place_pass(now=created + timedelta(seconds=121)).due == 1  # ...but at 120 s it may queue
    assert waiting_place_pass(now=created + timedelta(seconds=122)).due == 0  # once: then it pauses again


def _pauses_double(job, now):
    pauses = []
    for _ in range(6):
        waiting_place_pass(now=now)
        retry = Workload.objects.get(id=job.id).placement["retry"]
        at = datetime.fromisoformat(retry["at"])
        pauses.append((at - now).total_seconds())
        assert waiting_place_pass(now=at - timedelta(seconds=1)).due == 0  # still pausing
        now = at
    assert pauses == [10, 20, 40, 80, RETRY_CAP_S, RETRY_CAP_S]
    assert Workload.objects.get(id=job.id).placement["retry"]["tries"] == 6


def test_placement_on_an_event_does_not_wait_for_the_pause_and_a_place_ends_it(trio, starved, make_cluster, submit):
    make_cluster("onprem")
    job = submit()
    waiting_place_pass()
    starved.limit_gpus = 64
    starved.save()
    placed = workload_place(workload_id=job.id)  # e.g. a destination refused it: placed at once
    assert placed.state == "reserved" and "retry" not in placed.placement


def _spend_reads(run) -> int:
    """How often the month's cloud spend and the on-prem TCO were read while ``run`` ran."""
    with CaptureQueriesContext(connection) as seen:
        run()
    return sum('"broker_gpupool"."gpus_total" AS "gpus_total"' in q["sql"]
               or ('"broker_workload"."tenant_id" AS "tenant_id"' in q["sql"] and "price_per_gpu_hour" in q["sql"])
               for q in seen.captured_queries)


def test_with_a_cloud_budget_the_spend_is_read_once_per_pass_not_per_workload(trio, starved, make_cluster, submit):
    from decimal import Decimal

    trio.tenant.cloud_budget_month = Decimal("500.00")
    trio.tenant.save()
    starved.limit_gpus = 64
    starved.save()
    make_cluster("onprem", nodes=[4])
    make_cluster("cloudy", location="cloud", price="3.5", nodes=[8, 8])
    for i in range(6):
        submit(name=f"pass{i}")
    # the spend so far, what live cloud jobs may still cost, and the TCO: once for the six
    assert _spend_reads(waiting_place_pass) == 3
    one_by_one = [submit(name=f"single{i}") for i in range(3)]
    assert _spend_reads(lambda: [workload_place(workload_id=w.id) for w in one_by_one]) == 9  # per workload


def test_a_report_of_freed_gpus_ends_the_pause_of_a_workload_that_found_no_place(
        trio, quota, make_cluster, submit, sim):
    cluster = make_cluster("onprem", nodes=[8])
    local = sim.get("onprem").inject_foreign_job(name="local", gpus_per_worker=8, duration_s=3600)
    cluster_sync_inventory(cluster_id=cluster.id)
    job = submit(gpus_per_worker=8)
    now = timezone.now()
    waiting_place_pass(now=now)
    assert Workload.objects.get(id=job.id).state == "waiting"
    cluster_sync_inventory(cluster_id=cluster.id)  # the same numbers: still pausing
    assert waiting_place_pass(now=now + timedelta(seconds=3)).due == 0
    sim.get("onprem").cancel(local)
    cluster_sync_inventory(cluster_id=cluster.id)  # 8 GPUs free: looked at in the next pass
    report = waiting_place_pass(now=now + timedelta(seconds=4))
    assert (report.due, report.placed) == (1, 1)
    assert Workload.objects.get(id=job.id).state == "reserved"


def test_a_report_with_the_same_numbers_leaves_the_last_capacity_change_as_it_was(db, make_cluster):
    cluster = make_cluster("onprem")
    first = Cluster.objects.get(id=cluster.id).capacity_changed_at
    cluster_sync_inventory(cluster_id=cluster.id)
    assert first is not None and Cluster.objects.get(id=cluster.id).capacity_changed_at == first


def test_a_big_gang_past_its_hold_age_is_looked_at_in_every_pass_whatever_its_pause(
        trio, starved, make_cluster, submit):
    make_cluster("onprem", nodes=[8, 8])
    gang = submit(gpus_per_worker=8, workers=2)  # 16 GPUs: a big gang (aging.big_gang_gpus)
    small = submit(name="small", gpus_per_worker=1)
    created = Workload.objects.get(id=gang.id).created_at
    late = created + timedelta(hours=1, seconds=5)  # past aging.hold_after_s (3600 s)
    waiting_place_pass(now=late)
    report = waiting_place_pass(now=late + timedelta(seconds=1))  # both paused now
    assert (report.due, report.pausing) == (1, 1)
    assert Workload.objects.get(id=small.id).placement["retry"]["tries"] == 1  # the small one was left to pause


def test_a_burst_of_cloud_placements_in_one_pass_stays_within_the_tenants_budget(trio, quota, make_cluster, submit):
    from decimal import Decimal

    # two 1-hour 4-GPU jobs at 3.5 (14.00, 16.80 expected with the egress uplift), not three
    trio.tenant.cloud_budget_month = Decimal("40.00")
    trio.tenant.save()
    quota.limit_gpus = 64
    quota.save()
    make_cluster("cloudy", location="cloud", price="3.5", nodes=[8, 8])
    jobs = [submit(name=f"burst{i}", gpus_per_worker=4, time_limit_minutes=60) for i in range(4)]
    waiting_place_pass()
    states = [Workload.objects.get(id=j.id).state for j in jobs]
    assert states.count("reserved") == 2 and states.count("waiting") == 2
    waiting = Workload.objects.filter(state="waiting").first()
    assert "cloud budget" in waiting.raw_reason
    workload_place(workload_id=waiting.id)  # one at a time, the reserved ones' cost is counted too
    assert Workload.objects.get(id=waiting.id).state == "waiting"


def test_a_big_gang_that_holds_a_pool_pauses_again_like_any_other(trio, quota, make_cluster, submit, sim):
    from broker.models import GpuPool  # noqa: PLC0415
    from broker.services.fleet.policy import current_policy, policy_override  # noqa: PLC0415

    with policy_override(current_policy().text.replace("queue_after_s: 120", "queue_after_s: null")):
        _gang_pauses(quota, make_cluster, submit, sim, GpuPool)


def _gang_pauses(quota, make_cluster, submit, sim, GpuPool):
    quota.limit_gpus = 64
    quota.save()
    cluster = make_cluster("onprem", nodes=[8, 8])
    sim.get("onprem").inject_foreign_job(gpus_per_worker=4, duration_s=36000)  # the gang cannot fit now
    cluster_sync_inventory(cluster_id=cluster.id)
    gang = submit(gpus_per_worker=8, workers=2)
    now = timezone.now()
    Workload.objects.filter(id=gang.id).update(created_at=now - timedelta(hours=1, seconds=5))  # past its hold age
    waiting_place_pass(now=now)
    assert GpuPool.objects.filter(held_for=Workload.objects.get(id=gang.id).uid).exists()
    assert waiting_place_pass(now=now + timedelta(seconds=1)).due == 0  # it holds one: nothing new with time
