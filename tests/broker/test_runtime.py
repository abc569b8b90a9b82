"""The one runtime seam (broker/runtime.py): an override holds for its block and no longer,
is seen by every thread, stamps the broker's rows, and the replay and the fault harness see
every after-commit follow-up through it."""
from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import pytest
from django.test import TestCase
from django.utils import timezone as dj_timezone

from broker import runtime
from broker.backends.sim import SimClock
from broker.faults.install import captured_tasks, virtual_clock
from broker.models import AuditRecord, Workload
from broker.replay.broker_strategy import broker_context
from broker.services.records import tasks_bridge
from broker.services.notifying.deliveries import notify_on_commit

AT = datetime(2031, 5, 4, 12, 0, tzinfo=timezone.utc)


def test_an_override_holds_for_its_block_and_what_was_before_comes_back():
    before = runtime.current()
    with runtime.override(now=lambda: AT) as inside:
        assert runtime.now() == AT and runtime.current() is inside
        with runtime.override(sleep=lambda s: None):
            assert runtime.now() == AT  # an inner block keeps what it does not change
        assert runtime.current() is inside
    assert runtime.current() is before and runtime.now() != AT


def test_an_override_is_undone_when_its_block_raises():
    before = runtime.current()
    with pytest.raises(RuntimeError), runtime.override(now=lambda: AT):
        raise RuntimeError("the run failed")
    assert runtime.current() is before


def test_an_unknown_field_is_refused_and_nothing_changes():
    before = runtime.current()
    with pytest.raises(TypeError), runtime.override(clock=lambda: AT):
        pass
    assert runtime.current() is before


def test_a_thread_started_inside_an_override_reads_it():
    """Process-wide on purpose: a worker thread the fault harness starts sees its clock."""
    seen = []
    with runtime.override(now=lambda: AT):
        worker = threading.Thread(target=lambda: seen.append(runtime.now()))
        worker.start()
        worker.join()
    assert seen == [AT]


def test_sleep_goes_through_the_runtime():
    waits = []
    with runtime.override(sleep=waits.append):
        runtime.sleep(2.5)
    assert waits == [2.5]


def test_the_clock_override_leaves_djangos_clock_alone():
    with runtime.override(now=lambda: AT):
        assert dj_timezone.now() != AT and abs(dj_timezone.now() - datetime.now(timezone.utc)) < timedelta(minutes=1)


def test_the_broker_stamps_its_rows_with_the_runtime_clock(submit):
    with runtime.override(now=lambda: AT):
        workload = submit()
    assert (workload.created_at, workload.updated_at) == (AT, AT)
    assert set(AuditRecord.objects.filter(workload=workload).values_list("created_at", flat=True)) == {AT}

    later = AT + timedelta(hours=1)
    with runtime.override(now=lambda: later):
        workload.name = "renamed"
        workload.save()
    workload.refresh_from_db()
    assert (workload.created_at, workload.updated_at) == (AT, later)  # updated_at follows each save


def test_the_task_sink_sees_every_kind_of_follow_up_after_the_commit_only(trio, quota, submit):
    seen = []
    with tasks_bridge.task_sink(lambda name, *args: seen.append((name, args))):
        with TestCase.captureOnCommitCallbacks(execute=True):
            workload = submit()
            notify_on_commit(workload_id=workload.id, event="started")
            tasks_bridge.enqueue_webhook(7)
            tasks_bridge.enqueue_mail(subject="quota", body="over", to="owner@example.org")
            tasks_bridge.enqueue_impact(3)
            assert seen == []  # nothing before the commit
    assert seen == [
        ("place_workload", (workload.id,)),
        ("notify_workload_event", (workload.id, "started")),
        ("deliver_webhook", (7,)),
        ("send_mail", ("quota", "over", "owner@example.org")),
        ("run_impact", (3,)),
    ]


def test_the_fault_harness_queues_the_tasks_it_works_and_sees_the_others(trio, quota, submit, monkeypatch):
    handed_on = []
    monkeypatch.setattr(tasks_bridge, "deliver", lambda name, *args: handed_on.append((name, args)))
    queue: list = []
    with captured_tasks(queue), virtual_clock(lambda: AT):
        with TestCase.captureOnCommitCallbacks(execute=True):
            workload = submit()
            notify_on_commit(workload_id=workload.id, event="started")
    assert queue == [("place_workload", (workload.id,))]
    assert handed_on == [("notify_workload_event", (workload.id, "started"))]
    assert Workload.objects.get(id=workload.id).created_at == AT


def test_the_replay_runs_on_its_clock_and_drops_the_follow_ups(trio, quota, submit):
    clock = SimClock(origin=AT)
    clock.advance(90)
    with broker_context(clock, preset=None):
        with TestCase.captureOnCommitCallbacks(execute=True) as follow_ups:
            workload = submit()
        assert runtime.now() >= AT + timedelta(seconds=90)
    assert follow_ups  # the placement hand-off reached the replay's sink, which dropped it
    workload.refresh_from_db()
    assert workload.state == "submitted"  # nothing placed it: the replay is the task runner
    assert AT + timedelta(seconds=90) <= workload.created_at < AT + timedelta(seconds=91)
    assert runtime.current().task_sink is None  # the run's sink is gone with its block
