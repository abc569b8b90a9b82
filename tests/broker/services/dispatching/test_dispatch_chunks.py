"""Dispatch in chunks: a placing pass queues one dispatch task for the workloads it reserved
together; the task claims them in one transaction (attempts written before any cluster is
called), sends each, and records the acceptances in one transaction.  A failure of one
workload neither loses nor sends twice any other, and a dead worker's chunk is found or
sent exactly once after the lease."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import TestCase
from django.utils import timezone

from broker.backends.base import Unavailable
from broker.failpoints import armed
from broker.models import AttemptState, AuditRecord, DispatchAttempt, Reservation, Workload
from broker.placement.record import PlacementRecord
from broker.services.dispatching.send import workload_dispatch
from broker.services.dispatching.chunk import workloads_dispatch
from broker.services.placing.cycle import waiting_place_pass
from broker.services.following.reconcile import reconcile_fleet
from broker.services.records.tasks_bridge import task_sink
from broker.services.submitting.workloads import workload_cancel


class _Died(BaseException):
    """The worker process is gone (nothing after it runs)."""


@pytest.fixture
def reserved(make_cluster, submit):
    """Three workloads one pass reserved on ``onprem`` (their chunk's task not run)."""
    make_cluster("onprem")
    jobs = [submit(name=f"job{i}") for i in range(3)]
    waiting_place_pass()
    assert {Workload.objects.get(id=j.id).state for j in jobs} == {"reserved"}
    return [j.id for j in jobs]


def _on_nth(n: int, action):
    calls = []

    def fire(name: str) -> None:
        calls.append(name)
        if len(calls) == n:
            action()

    return fire


def _lost_reply():
    raise Unavailable("onprem: submit timed out waiting for the reply")


def _died():
    raise _Died()


def _jobs_at(sim, ids) -> list[int]:
    return [len(sim.get("onprem").jobs(Workload.objects.get(id=i).uid)) for i in ids]


def _states(ids) -> list[str]:
    return [Workload.objects.get(id=i).state for i in ids]


def _attempts(wid) -> list[str]:
    return list(DispatchAttempt.objects.filter(workload_id=wid).order_by("number").values_list("state", flat=True))


def _after_the_lease(ids) -> None:
    past = timezone.now() - timedelta(seconds=600)
    Workload.objects.filter(id__in=ids).update(updated_at=past)
    DispatchAttempt.objects.filter(workload_id__in=ids).update(created_at=past)


def _reconcile_and_run_its_tasks() -> None:
    with TestCase.captureOnCommitCallbacks(execute=True):
        reconcile_fleet()


def test_a_pass_queues_one_dispatch_task_for_the_workloads_it_reserved_together(make_cluster, submit):
    make_cluster("onprem")
    ids = [submit(name=f"job{i}").id for i in range(3)]
    queued: list = []
    with task_sink(lambda *task: queued.append(task)), TestCase.captureOnCommitCallbacks(execute=True):
        waiting_place_pass()
    assert queued == [("dispatch_workloads", sorted(ids))]


def test_a_chunk_sends_each_workload_once_and_records_it_as_one_sent_alone(reserved, sim):
    assert workloads_dispatch(workload_ids=reserved) == 3

    assert _states(reserved) == ["queued"] * 3 and _jobs_at(sim, reserved) == [1, 1, 1]
    for wid in reserved:
        workload = Workload.objects.get(id=wid)
        attempt = DispatchAttempt.objects.get(workload_id=wid)
        assert attempt.state == AttemptState.ACCEPTED and attempt.destination_job_id == workload.destination_job_id
        assert workload.destination_job_id == sim.get("onprem").jobs(workload.uid)[0].job_id
        assert workload.dispatched_at is not None
        assert Reservation.objects.get(workload_id=wid).state == "confirmed"
        records = AuditRecord.objects.filter(workload_id=wid)
        confirmed = records.get(action="reservation.confirmed")
        assert confirmed.inputs["transition"] == {"to": "confirmed", "reason": "accepted"}
        assert records.get(action="dispatch.accepted").destination_job_id == workload.destination_job_id
        decided = records.get(action="placement.decided")
        assert decided.destination_job_id == workload.destination_job_id  # the decision shows its job

    assert workloads_dispatch(workload_ids=reserved) == 0  # the task delivered again: nothing more
    assert _jobs_at(sim, reserved) == [1, 1, 1] and DispatchAttempt.objects.count() == 3


def test_a_chunk_sends_the_gpu_model_of_the_pool_the_placement_record_chose(reserved, sim):
    workloads_dispatch(workload_ids=reserved)
    for wid in reserved:
        workload = Workload.objects.get(id=wid)
        chosen = PlacementRecord.from_json(workload.placement).chosen
        assert chosen is not None and chosen.pool == "a100-80gb"
        (job,) = sim.get("onprem").jobs(workload.uid)
        assert job.request.gpu_models == ("A100",)  # the class narrowed to the chosen pool's model


def test_a_lost_reply_in_a_chunk_leaves_the_others_sent_once_and_that_one_found_later(reserved, sim):
    queued: list = []
    with task_sink(lambda *task: queued.append(task)), TestCase.captureOnCommitCallbacks(execute=True):
        with armed({"dispatch.after_submit": _on_nth(2, _lost_reply)}):
            assert workloads_dispatch(workload_ids=reserved) == 1
    first, lost, held = reserved
    assert _states(reserved) == ["queued", "dispatching", "dispatching"]
    assert _attempts(first) == ["accepted"] and _attempts(lost) == ["unknown"]
    # the cluster did not answer: the chunk calls it no more; that workload goes on its own
    assert _attempts(held) == ["not_sent"] and queued == [("dispatch_workload", held)]
    assert _jobs_at(sim, reserved) == [1, 1, 0]

    workload_dispatch(workload_id=held)  # its own task
    _after_the_lease([lost])
    _reconcile_and_run_its_tasks()  # the lost reply is looked up: found, not sent again

    assert _states(reserved) == ["queued"] * 3 and _jobs_at(sim, reserved) == [1, 1, 1]
    assert _attempts(lost) == ["accepted", "adopted"] and _attempts(held) == ["not_sent", "accepted"]


def test_a_cluster_that_does_not_answer_is_called_once_per_chunk_and_the_rest_go_alone(reserved, sim):
    sim.get("onprem").set_faults(unreachable=True)
    queued: list = []
    with task_sink(lambda *task: queued.append(task)), TestCase.captureOnCommitCallbacks(execute=True):
        assert workloads_dispatch(workload_ids=reserved) == 0
    first, *rest = reserved
    assert _attempts(first) == ["unknown"] and [_attempts(w) for w in rest] == [["not_sent"], ["not_sent"]]
    assert queued == [("dispatch_workload", w) for w in rest]
    assert _states(reserved) == ["dispatching"] * 3

    sim.get("onprem").set_faults(unreachable=False)
    for wid in rest:
        workload_dispatch(workload_id=wid)
    _after_the_lease([first])
    _reconcile_and_run_its_tasks()
    assert _states(reserved) == ["queued"] * 3 and _jobs_at(sim, reserved) == [1, 1, 1]


def test_a_worker_dying_mid_chunk_leaves_each_workload_found_or_sent_exactly_once(reserved, sim):
    with armed({"dispatch.after_submit": _on_nth(2, _died)}), pytest.raises(_Died):
        workloads_dispatch(workload_ids=reserved)
    # two reached the cluster, the third was never sent; nothing was recorded after the claim
    assert _jobs_at(sim, reserved) == [1, 1, 0]
    assert [_attempts(w) for w in reserved] == [["started"]] * 3

    assert workloads_dispatch(workload_ids=reserved) == 0  # redelivered at once: all still in flight
    assert _jobs_at(sim, reserved) == [1, 1, 0]

    _after_the_lease(reserved)
    _reconcile_and_run_its_tasks()
    assert _states(reserved) == ["queued"] * 3 and _jobs_at(sim, reserved) == [1, 1, 1]
    # the two that landed are adopted (the dead attempt is the one that created each job);
    # the third's dead attempt never reached the cluster: the look-up finds nothing, it is sent
    landed = ["accepted", "adopted"]
    assert [_attempts(w) for w in reserved] == [landed, landed, ["started", "accepted"]]


def test_a_workload_cancelled_before_its_chunk_runs_is_not_sent_and_the_others_are(reserved, sim, trio):
    cancelled, *others = reserved
    workload_cancel(user=trio.member, workload_id=cancelled)
    assert workloads_dispatch(workload_ids=reserved) == 2
    assert _states(reserved) == ["cancelled", "queued", "queued"] and _jobs_at(sim, reserved) == [0, 1, 1]
    assert _attempts(cancelled) == []


def test_a_chunk_whose_attempt_number_is_taken_dispatches_each_workload_alone(reserved, sim, monkeypatch):
    from broker.services.dispatching import chunk as dispatch_chunk

    alone = []
    real_alone = dispatch_chunk._alone
    monkeypatch.setattr(dispatch_chunk, "_alone", lambda ids: alone.append(ids) or real_alone(ids))
    fired: list[str] = []

    def taken(name: str) -> None:  # another worker's attempt lands first: the INSERT conflicts
        if not fired:
            fired.append(name)
            workload = Workload.objects.get(id=reserved[1])
            DispatchAttempt.objects.create(workload=workload, cluster=workload.cluster, number=1)

    with armed({"dispatch.before_attempt_written": taken}):
        assert workloads_dispatch(workload_ids=reserved) == 3
    assert alone == [reserved]  # the claim rolled back whole (the other worker's row with it, here)
    assert _states(reserved) == ["queued"] * 3 and _jobs_at(sim, reserved) == [1, 1, 1]
    assert [len(_attempts(w)) for w in reserved] == [1, 1, 1]
