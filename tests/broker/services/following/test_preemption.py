"""A running job its destination preempts is not a failure: where the destination queues it
again (Kueue's eviction) the workload is queued there and follows the same job; where the
job ends (Slurm's PreemptMode=CANCEL) the workload is placed again for a new job. Either way
the user is told, the audit says by what, and every run's GPU-seconds are charged once."""
from __future__ import annotations

from accounting.models import UsageEntry
from accounting.services.usage import usage_collect
from broker.backends.base import JobState, ProjectIdentity
from broker.backends.sim.queues import PREEMPTED, queue_quotas
from broker.local_limits import GroupQuota
from broker.models import AuditRecord, Notification, NotificationPreference, Reservation, Workload
from broker.spec import validate_spec


def _kueue_that_preempts(make_cluster, queue: str):
    """One ClusterQueue of 8 GPUs behind the project's LocalQueue that preempts lower
    priorities within itself."""
    quota = GroupQuota("ClusterQueue main flavor a100-80gb", pool="a100-80gb", scope=queue, limit_gpus=8,
                       preemption="LowerPriority")
    return make_cluster("kq", flavor="kueue", nodes=[8], queue_quotas=queue_quotas([quota]))


def _urgent_local_job(sim, cluster: str, queue: str, gpus: int, run_s: float) -> str:
    """A job a local user submits straight to the cluster's LocalQueue, at a higher priority."""
    spec = validate_spec({"project": "locals", "name": "urgent", "command": "sleep 1", "gpus_per_worker": gpus,
                          "gpu_models": ["A100"], "time_limit_minutes": 60, "priority": "high"})
    return sim.get(cluster).submit(spec, None, ProjectIdentity(tenant="locals", project="locals", queue=queue),
                                  duration_s=run_s)


def test_a_job_evicted_and_queued_again_by_kueue_is_queued_then_runs_again_and_is_charged_once(
        make_cluster, submit, drive, sim, poll, trio, django_capture_on_commit_callbacks):
    cluster = _kueue_that_preempts(make_cluster, trio.project.k8s_queue)
    NotificationPreference.objects.create(user=trio.member, events=["preempted"], email=True)
    workload = submit(gpus_per_worker=8, priority="low")
    sim.set_duration(workload.uid, 600)
    workload = drive(workload)
    poll(cluster)
    workload.refresh_from_db()
    assert workload.state == "running", (workload.reason, workload.raw_reason)
    job_id = workload.destination_job_id

    sim.advance(100)
    _urgent_local_job(sim, "kq", trio.project.k8s_queue, gpus=8, run_s=300)
    with django_capture_on_commit_callbacks(execute=True):
        poll(cluster)
    workload.refresh_from_db()
    assert workload.state == "queued" and workload.preemptions == 1
    assert workload.destination_job_id == job_id  # the same job, queued again there
    assert Reservation.objects.get(workload=workload).state == "confirmed"  # the destination still holds it
    record = AuditRecord.objects.get(workload=workload, action="workload.preempted")
    # the destination's words as it reports the job now (the simulated Kueue: why it waits)
    assert record.message.startswith("preempted at kq (") and record.message.endswith("): queued again there")
    assert sim.get("kq").job(job_id).raw_reason in record.message or PREEMPTED in record.message
    assert record.inputs["transition"] == {"to": "queued", "reason": "requeued_at_destination"}
    assert Notification.objects.filter(workload=workload, event="preempted").count() == 1

    sim.advance(300)  # the urgent job ends: this one runs again, from the start, for 600 s
    poll(cluster)
    workload.refresh_from_db()
    assert workload.state == "running"
    sim.advance(600)
    poll(cluster)
    workload.refresh_from_db()
    assert workload.state == "completed" and workload.preemptions == 1
    usage_collect(cluster_id=cluster.id)
    entry = UsageEntry.objects.get(cluster=cluster, job_id=job_id)
    assert entry.gpu_seconds == 8 * (100 + 600)  # both runs, once each


def test_a_job_preempted_and_ended_there_is_placed_again_and_each_run_is_charged_once(
        make_cluster, submit, drive, sim, poll):
    onprem = make_cluster("onprem", nodes=[8], price="1.0")
    workload = submit(gpus_per_worker=4)
    sim.set_duration(workload.uid, 600)
    workload = drive(workload)
    poll(onprem)
    workload.refresh_from_db()
    first_job = workload.destination_job_id
    assert workload.state == "running"

    sim.advance(120)
    sim.get("onprem").preempt(first_job)
    poll(onprem)
    workload.refresh_from_db()
    assert workload.state == "waiting" and workload.preemptions == 1 and workload.destination_job_id == ""
    assert workload.raw_reason == "preempted at onprem (preempted by another job): placed again"
    assert list(Reservation.objects.filter(workload=workload).values_list("state", flat=True)) == ["released"]
    record = AuditRecord.objects.get(workload=workload, action="workload.preempted")
    assert record.destination_job_id == first_job
    assert record.inputs["transition"] == {"to": "waiting", "reason": "preempted_at_destination"}

    workload = drive(Workload.objects.get(id=workload.id))  # the next placement pass
    poll(onprem)
    workload.refresh_from_db()
    assert workload.state == "running" and workload.destination_job_id not in ("", first_job)
    second_job = workload.destination_job_id
    sim.advance(600)
    poll(onprem)
    workload.refresh_from_db()
    assert workload.state == "completed" and workload.preemptions == 1
    assert sim.get("onprem").job(first_job).state is JobState.PREEMPTED
    usage_collect(cluster_id=onprem.id)
    charged = dict(UsageEntry.objects.filter(cluster=onprem).values_list("job_id", "gpu_seconds"))
    assert charged == {first_job: 4 * 120, second_job: 4 * 600}


def test_a_job_preempted_while_its_cancel_is_on_the_way_ends_cancelled(make_cluster, submit, drive, sim, poll):
    onprem = make_cluster("onprem", nodes=[8])
    workload = drive(submit(gpus_per_worker=4))
    poll(onprem)
    Workload.objects.filter(id=workload.id).update(state="cancelling")
    sim.get("onprem").preempt(workload.destination_job_id)
    poll(onprem)
    workload.refresh_from_db()
    assert workload.state == "cancelled" and workload.preemptions == 0
