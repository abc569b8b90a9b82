"""Preemption where the policy makes the broker its owner, on the simulator: a long-waiting
higher-priority workload gets room from lower, preemptible work the broker placed there,
cancelled there first (confirmed), never from local jobs, other priorities or clusters whose
control plane owns preemption."""
from __future__ import annotations

from contextlib import contextmanager
from datetime import timedelta

from django.utils import timezone

from broker.backends.base import JobState
from broker.models import AuditRecord, Reservation, Workload
from broker.services.fleet.inventory import cluster_sync_inventory
from broker.services.following.status import cluster_poll_status
from broker.services.fleet.policy import current_policy, policy_override
from broker.services.placing.preempting import broker_preemption_pass

LATER = timedelta(minutes=30)


@contextmanager
def owner(cluster: str, who: str = "broker", preemptible: str = "[low]", extra: str = ""):
    text = current_policy().text + f"\npreemption:\n  owners: {{{cluster}: {who}}}\n  after_s: 600\n" \
        f"  preemptible: {preemptible}\n" + extra
    with policy_override(text):
        yield


def _full_of(make_cluster, submit, drive, *, priority: str = "low"):
    """'owned' (one node of 8) runs a broker job at ``priority``; a high one waits 20 min."""
    cluster = make_cluster("owned", nodes=[8])
    victim = drive(submit(name="scavenge", gpus_per_worker=8, priority=priority))
    assert victim.state in ("queued", "running")
    Workload.objects.filter(id=victim.id).update(state="running", started_at=timezone.now())
    waiting = drive(submit(name="urgent", gpus_per_worker=8, priority="high"))
    assert waiting.state == "waiting" and waiting.reason == "capacity"
    Workload.objects.filter(id=waiting.id).update(created_at=timezone.now() - timedelta(minutes=20))
    return cluster, Workload.objects.get(id=victim.id), waiting


def test_a_long_waiting_high_priority_job_preempts_the_low_one_cancel_confirmed_first(
        make_cluster, submit, drive, sim):
    with owner("owned"):
        cluster, victim, waiting = _full_of(make_cluster, submit, drive)
        old_job = victim.destination_job_id
        assert broker_preemption_pass(now=timezone.now()) == 1
        urgent = drive(Workload.objects.get(id=waiting.id))
    assert sim.get("owned").job(old_job).state == JobState.CANCELLED
    assert urgent.cluster == cluster and urgent.state in ("queued", "running")
    victim.refresh_from_db()
    assert victim.state == "waiting" and victim.preemptions == 1 and victim.destination_job_id == ""
    assert victim.raw_reason.startswith("owned: pool a100-80gb: 0 of 1 workers")  # placed again: no room left
    released = Reservation.objects.filter(workload=victim).values_list("state", flat=True)
    assert list(released) == ["released"]
    note = AuditRecord.objects.get(workload=victim, action="workload.preempted")
    assert note.inputs["for"] == waiting.uid and note.inputs["preempted"] == victim.uid
    assert f"preempted by the broker at owned for urgent ({waiting.uid}, priority high over low)" in note.message
    assert AuditRecord.objects.get(workload=waiting, action="preemption.made").inputs["preempted"] == victim.uid


def test_a_job_queued_at_an_owned_cluster_gets_room_there_and_its_own_scheduler_starts_it(
        make_cluster, submit, drive, sim):
    # a job that fits nowhere queues at once at its destination (queue_after_s: 0)
    with owner("owned", extra="aging:\n  queue_after_s: 0\n"):
        cluster = make_cluster("owned", nodes=[8])
        victim = drive(submit(name="scavenge", gpus_per_worker=8, priority="low"))
        Workload.objects.filter(id=victim.id).update(state="running", started_at=timezone.now())
        urgent = drive(submit(name="urgent", gpus_per_worker=8, priority="high"))
        cluster_poll_status(cluster_id=cluster.id)  # the local queue's reason
        urgent.refresh_from_db()
        assert urgent.state == "queued" and urgent.reason == "capacity"
        queued_job = urgent.destination_job_id
        Workload.objects.filter(id=urgent.id).update(created_at=timezone.now() - timedelta(minutes=20))
        assert broker_preemption_pass(now=timezone.now()) == 1
        sim.advance(1)
    assert sim.get("owned").job(victim.destination_job_id).state == JobState.CANCELLED
    assert sim.get("owned").job(queued_job).state == JobState.RUNNING  # the same job: not placed again
    assert Workload.objects.get(id=urgent.id).destination_job_id == queued_job
    victim.refresh_from_db()
    assert victim.preemptions == 1 and victim.destination_job_id != queued_job


def test_a_job_already_preempted_twice_runs_on_to_its_end(make_cluster, submit, drive, sim):
    # the replay's priority scenario preempted scavenger jobs 22 times each on average
    with owner("owned"):
        _, victim, _ = _full_of(make_cluster, submit, drive)
        Workload.objects.filter(id=victim.id).update(preemptions=2)
        assert broker_preemption_pass(now=timezone.now()) == 0
    assert Workload.objects.get(id=victim.id).state == "running"


def test_nothing_is_preempted_where_the_local_control_plane_owns_preemption(make_cluster, submit, drive, sim):
    with owner("owned", who="local"):
        _, victim, _ = _full_of(make_cluster, submit, drive)
        assert broker_preemption_pass(now=timezone.now()) == 0
    assert Workload.objects.get(id=victim.id).state == "running"


def test_work_at_a_priority_the_policy_does_not_let_preempt_runs_on(make_cluster, submit, drive, sim):
    with owner("owned"):
        _, victim, _ = _full_of(make_cluster, submit, drive, priority="normal")
        assert broker_preemption_pass(now=timezone.now()) == 0
    assert Workload.objects.get(id=victim.id).state == "running"


def test_a_local_job_is_never_preempted_by_the_broker(make_cluster, submit, drive, sim):
    with owner("owned", preemptible="[low, normal]"):
        cluster = make_cluster("owned", nodes=[8])
        local = sim.get("owned").inject_foreign_job(gpus_per_worker=8, account="locals", duration_s=36000)
        sim.advance(60)
        cluster_sync_inventory(cluster_id=cluster.id)
        waiting = drive(submit(name="urgent", gpus_per_worker=8, priority="high"))
        Workload.objects.filter(id=waiting.id).update(created_at=timezone.now() - timedelta(minutes=20))
        assert broker_preemption_pass(now=timezone.now()) == 0
    assert sim.get("owned").job(local).state == JobState.RUNNING


def test_before_the_policys_wait_nothing_is_preempted(make_cluster, submit, drive, sim):
    with owner("owned"):
        _, victim, waiting = _full_of(make_cluster, submit, drive)
        Workload.objects.filter(id=waiting.id).update(created_at=timezone.now() - timedelta(minutes=5))
        assert broker_preemption_pass(now=timezone.now()) == 0
    assert Workload.objects.get(id=victim.id).state == "running"


def test_an_unconfirmed_cancel_leaves_the_victim_running_and_is_tried_again(make_cluster, submit, drive, sim):
    with owner("owned"):
        _, victim, waiting = _full_of(make_cluster, submit, drive)
        sim.get("owned").set_faults(unreachable=True)
        assert broker_preemption_pass(now=timezone.now()) == 0
        victim.refresh_from_db()
        assert victim.state == "running" and victim.preemptions == 0
        assert AuditRecord.objects.filter(workload=victim, action="preempt.retrying").exists()
        sim.get("owned").set_faults(unreachable=False)
        assert broker_preemption_pass(now=timezone.now()) == 1
    assert Workload.objects.get(id=victim.id).state == "waiting"


def _biology_fills_owned(make_cluster, submit, drive, trio, gpu_classes):
    """'owned' (two nodes of 8, the fleet's 16 a100-80gb) runs two 8-GPU biology jobs at
    normal priority, the second started later; physics' min_share of 0.25 guarantees it 4."""
    from broker.models import Quota

    Quota.objects.create(tenant=trio.other_tenant, gpu_class=gpu_classes["a100-80gb"], limit_gpus=64)
    make_cluster("owned", nodes=[8, 8])
    started = []
    for i in range(2):
        job = drive(submit(name=f"bio-{i}", gpus_per_worker=8, user=trio.outsider, project=trio.other_project))
        Workload.objects.filter(id=job.id).update(state="running",
                                                  started_at=timezone.now() - timedelta(minutes=30 - i))
        started.append(job)
    return started


def test_a_tenant_under_its_minimum_share_reclaims_gpus_from_one_above_its_own(
        make_cluster, submit, drive, sim, trio, gpu_classes):
    with owner("owned", preemptible="[low, normal]"):
        first, later = _biology_fills_owned(make_cluster, submit, drive, trio, gpu_classes)
        waiting = drive(submit(name="lattice", gpus_per_worker=4))  # normal, as biology's
        assert waiting.state == "waiting"
        Workload.objects.filter(id=waiting.id).update(created_at=timezone.now() - timedelta(minutes=20))
        assert broker_preemption_pass(now=timezone.now()) == 1
        placed = drive(Workload.objects.get(id=waiting.id))
    assert placed.state in ("queued", "running") and placed.cluster.name == "owned"
    assert Workload.objects.get(id=later.id).preemptions == 1  # the later-started one
    assert Workload.objects.get(id=first.id).state == "running"


def test_no_reclaim_past_the_guarantee_at_the_same_priority(make_cluster, submit, drive, sim, trio, gpu_classes):
    with owner("owned", preemptible="[low, normal]"):
        _biology_fills_owned(make_cluster, submit, drive, trio, gpu_classes)
        waiting = drive(submit(name="lattice", gpus_per_worker=8))  # 8 > the 4 it is guaranteed
        Workload.objects.filter(id=waiting.id).update(created_at=timezone.now() - timedelta(minutes=20))
        assert broker_preemption_pass(now=timezone.now()) == 0
    assert Workload.objects.filter(state="running").count() == 2


def test_each_run_of_a_job_the_broker_preempted_is_charged_once(make_cluster, submit, drive, sim):
    from accounting.models import UsageEntry
    from accounting.services.usage import usage_collect
    from broker.services.following.status import cluster_poll_status

    with owner("owned"):
        cluster = make_cluster("owned", nodes=[8])
        victim = drive(submit(name="scavenge", gpus_per_worker=8, priority="low", time_limit_minutes=600))
        first_job = victim.destination_job_id
        sim.advance(600)
        cluster_poll_status(cluster_id=cluster.id)
        assert Workload.objects.get(id=victim.id).state == "running"
        waiting = drive(submit(name="urgent", gpus_per_worker=8, priority="high", time_limit_minutes=60))
        Workload.objects.filter(id=waiting.id).update(created_at=timezone.now() - timedelta(minutes=20))
        assert broker_preemption_pass(now=timezone.now()) == 1
        drive(Workload.objects.get(id=waiting.id))
        sim.advance(2 * 3600)  # the urgent job ends
        cluster_poll_status(cluster_id=cluster.id)
        cluster_sync_inventory(cluster_id=cluster.id)
        second = drive(Workload.objects.get(id=victim.id))
        assert second.state in ("queued", "running") and second.destination_job_id != first_job
        sim.advance(12 * 3600)  # and the victim's second run
        cluster_poll_status(cluster_id=cluster.id)
        usage_collect(cluster_id=cluster.id)
    assert Workload.objects.get(id=victim.id).state == "completed"
    entries = {e.job_id: e.gpu_seconds for e in UsageEntry.objects.filter(workload=victim)}
    assert set(entries) == {first_job, second.destination_job_id}
    owned = sim.get("owned")
    ran = {job: owned.job(job).ended_at - owned.job(job).started_at for job in entries}
    assert ran[first_job] >= 600  # the first run, until the broker's cancel
    assert entries == {job: round(8 * seconds) for job, seconds in ran.items()}
