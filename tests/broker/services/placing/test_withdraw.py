"""A job held at its destination by a local policy reason too long is withdrawn (cancel
confirmed first, then the reservation released) and placed elsewhere."""
from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from broker.backends.base import JobState
from broker.models import AuditRecord, Reservation
from broker.services.placing.withdraw import policy_holds_withdraw


def _held_on_a_shrunk_quota(make_cluster, submit, drive, sim, poll):
    """Placed on 'held' (its stored limits say 24), whose quota then is 4: Kueue keeps the
    8-GPU job pending with 'maximum capacity', a policy reason."""
    held = make_cluster("held", flavor="kueue", nodes=[8, 8], price="1.0", quotas={"a100-80gb": 24})
    other = make_cluster("other", nodes=[8, 8], price="3.0")
    sim.get("held").set_quota("a100-80gb", 4)
    workload = drive(submit(gpus_per_worker=8))
    poll(held)
    workload.refresh_from_db()
    assert workload.state == "queued" and workload.cluster == held and workload.reason == "policy"
    return held, other, workload


def test_long_local_policy_hold_withdraws_the_job_and_places_it_elsewhere(make_cluster, submit, drive, sim, poll):
    held, other, workload = _held_on_a_shrunk_quota(make_cluster, submit, drive, sim, poll)
    old_job = workload.destination_job_id
    assert policy_holds_withdraw(now=timezone.now() + timedelta(minutes=10)) == 0  # not yet past the limit
    assert policy_holds_withdraw(now=timezone.now() + timedelta(minutes=31)) == 1
    workload = drive(workload.__class__.objects.get(id=workload.id))
    assert workload.state == "queued" and workload.cluster == other
    assert sim.get("held").job(old_job).state == JobState.CANCELLED
    assert workload.tried_clusters == ["held"]
    assert "withdrawn after 31 min held by local policy at held" in workload.placement["rejections"]["held"]
    assert workload.placement["excluded"]["held"]["rule"] == "rejected"
    states = list(Reservation.objects.filter(workload=workload).order_by("id").values_list("state", "cluster__name"))
    assert states == [("released", "held"), ("confirmed", "other")]
    withdrawn = AuditRecord.objects.get(workload=workload, action="workload.withdrawn")
    assert withdrawn.cluster == "held" and withdrawn.destination_job_id == old_job


def test_withdrawal_waits_for_the_cancel_to_be_confirmed_before_releasing(make_cluster, submit, drive, sim, poll):
    held, other, workload = _held_on_a_shrunk_quota(make_cluster, submit, drive, sim, poll)
    sim.get("held").set_faults(unreachable=True)
    later = timezone.now() + timedelta(hours=1)
    assert policy_holds_withdraw(now=later) == 0
    workload.refresh_from_db()
    assert workload.state == "queued" and workload.cluster == held
    assert Reservation.objects.get(workload=workload).state == "confirmed"  # still held: not released
    assert AuditRecord.objects.filter(workload=workload, action="withdraw.retrying").exists()
    assert not AuditRecord.objects.filter(workload=workload, action="reservation.released").exists()

    sim.get("held").clear_faults()
    assert policy_holds_withdraw(now=later) == 1
    actions = list(AuditRecord.objects.filter(workload=workload).values_list("action", flat=True))
    assert actions.index("withdraw.retrying") < actions.index("reservation.released") < actions.index(
        "workload.withdrawn")


def test_capacity_wait_at_the_destination_is_not_withdrawn(make_cluster, submit, drive, sim, poll):
    # the report showed a free node; a foreign job took it before ours arrived
    only = make_cluster("only", nodes=[8])
    sim.get("only").inject_foreign_job(gpus_per_worker=8, duration_s=36000)
    workload = drive(submit(gpus_per_worker=8))
    poll(only)
    workload.refresh_from_db()
    assert workload.state == "queued" and workload.reason == "capacity"
    assert policy_holds_withdraw(now=timezone.now() + timedelta(hours=2)) == 0
    workload.refresh_from_db()
    assert workload.state == "queued" and Reservation.objects.get(workload=workload).state == "confirmed"
