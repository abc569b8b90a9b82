"""A job that fits nowhere now waits at the broker for the policy's ``queue_after_s``, then
waits in the queue of the cluster whose queue ahead of it turns over first."""
from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from broker.models import AuditRecord, Workload
from broker.services.fleet.inventory import cluster_sync_inventory
from broker.services.fleet.policy import current_policy, policy_override


def _full(sim, cluster, *, queued: int = 0) -> None:
    """Every GPU of the cluster busy for hours with a local user's work; ``queued`` more
    8-GPU jobs of theirs pending behind it."""
    for _ in range(2):
        sim.get(cluster.name).inject_foreign_job(gpus_per_worker=8, account="locals", duration_s=36000)
    for _ in range(queued):
        sim.get(cluster.name).inject_foreign_job(gpus_per_worker=8, account="locals", duration_s=36000)
    sim.advance(60)  # they start, and the cluster's throughput is on record
    cluster_sync_inventory(cluster_id=cluster.id)


def _aged(workload, seconds: float):
    Workload.objects.filter(id=workload.id).update(created_at=timezone.now() - timedelta(seconds=seconds))
    return Workload.objects.get(id=workload.id)


def test_a_job_that_fits_nowhere_waits_at_the_broker_before_its_queue_after_time(make_cluster, submit, drive, sim):
    long_queue = make_cluster("long-queue", nodes=[8, 8])
    _full(sim, long_queue, queued=3)
    workload = drive(submit(gpus_per_worker=4))
    assert workload.state == "waiting" and workload.reason == "capacity"
    assert workload.cluster is None


def test_after_queue_after_it_waits_in_the_queue_that_turns_over_first(make_cluster, submit, drive, sim):
    long_queue = make_cluster("long-queue", nodes=[8, 8], price="1.0")
    short_queue = make_cluster("short-queue", nodes=[8, 8], price="3.0")
    _full(sim, long_queue, queued=3)
    _full(sim, short_queue)
    workload = drive(_aged(submit(gpus_per_worker=4), 180))
    assert workload.state == "queued" and workload.cluster == short_queue  # not the cheaper one, 24 GPUs behind
    chosen = workload.placement["chosen"]
    assert chosen["cluster"] == "short-queue" and chosen["assignment"] == []
    assert chosen["detail"]["queued_turnover_s"] > 0
    decided = AuditRecord.objects.get(workload=workload, action="placement.decided")
    assert "to wait in its queue (nothing fits now)" in decided.message


def test_with_queue_after_off_it_stays_at_the_broker(make_cluster, submit, drive, sim):
    busy = make_cluster("busy", nodes=[8, 8])
    _full(sim, busy)
    with policy_override(current_policy().text.replace("queue_after_s: 120", "queue_after_s: null")):
        workload = drive(_aged(submit(gpus_per_worker=4), 3000))
    assert workload.state == "waiting" and workload.cluster is None


def test_a_cluster_that_could_never_take_the_job_is_not_a_queue_for_it(make_cluster, submit, drive, sim):
    small = make_cluster("small", nodes=[4])
    big = make_cluster("big", nodes=[8, 8])
    _full(sim, big)
    workload = drive(_aged(submit(gpus_per_worker=8, workers=2), 600))
    assert workload.state == "queued" and workload.cluster == big
    assert small.name not in {c["cluster"] for c in workload.placement["ranked"]}


def test_under_fair_share_it_waits_in_the_queue_whose_pending_work_it_would_jump(
    make_cluster, submit, drive, sim, poll
):
    # the project's account (lattice) has more fair share than the local users' (locals):
    # Slurm starts it before their 24 queued GPUs, so that queue is shorter for it than the
    # other cluster's 8
    fair = make_cluster("fair-share", nodes=[8, 8], price="1.0", share_points={"lattice": 90.0, "locals": 10.0})
    plain = make_cluster("plain", nodes=[8, 8], price="3.0")
    _full(sim, fair, queued=3)
    _full(sim, plain, queued=1)
    fair.refresh_from_db()
    assert fair.queue_pending_by_scope == {"locals": 24}
    workload = drive(_aged(submit(gpus_per_worker=4), 180))
    assert workload.state == "queued" and workload.cluster == fair
    sim.advance(36000)  # the local users' first jobs end: the broker's job starts before their queued ones
    poll(fair)
    workload.refresh_from_db()
    assert workload.state == "running"
    assert sim.get(fair.name).inventory().queue.pending_gpus == 16  # two of theirs still wait
