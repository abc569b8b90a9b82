"""Notifications: a signed webhook checked by a receiving server on loopback, retried with
backoff until it lands; e-mail through Django's mail; nothing for other users' workloads;
the lifecycle steps enqueue them on commit."""
from __future__ import annotations

import hashlib
import hmac
import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from django.core import mail
from django.utils import timezone

from broker.backends.base import DestinationJob, JobState
from broker.models import Notification, Workload
from broker.services.notifying.deliveries import (
    SIGNATURE_HEADER, long_waits_notify, notifications_send, preference_set, retry_delay_s,
)
from broker.services.following.status import workload_apply_status


class Receiver:
    """An HTTP server on loopback that checks each POST's signature and answers from a script."""

    def __init__(self, statuses: list[int]):
        self.got: list[dict] = []
        self.secret = ""  # the user's, set once their preference is stored
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                expected = "sha256=" + hmac.new(receiver.secret.encode(), body, hashlib.sha256).hexdigest()
                receiver.got.append({"body": body, "signed": hmac.compare_digest(
                    self.headers.get(SIGNATURE_HEADER, ""), expected), "event": self.headers.get("X-GPUBroker-Event")})
                self.send_response(statuses.pop(0) if statuses else 200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver(trio, settings):
    settings.GPUBROKER_WEBHOOK_ALLOW_LOOPBACK = True  # the receiver runs on loopback, here
    made = []

    def _make(user, statuses=()):
        r = Receiver(list(statuses))
        r.secret = preference_set(user=user, events=["started", "ended", "failed", "long_wait"],
                                  long_wait_minutes=30, email=False, webhook_url=r.url).webhook_secret
        made.append(r)
        return r
    yield _make
    for r in made:
        r.close()


def test_webhook_is_signed_with_the_users_secret_and_recorded(trio, quota, submit, receiver,
                                                              django_capture_on_commit_callbacks):
    hook = receiver(trio.member)
    workload = submit()
    with django_capture_on_commit_callbacks(execute=True):
        notifications_send(workload_id=workload.id, event="started")
    assert len(hook.got) == 1 and hook.got[0]["signed"] and hook.got[0]["event"] == "started"
    payload = json.loads(hook.got[0]["body"])
    assert payload["event"] == "started" and payload["workload"]["uid"] == workload.uid
    note = Notification.objects.get()
    assert (note.user, note.channel, note.state, note.attempts, note.last_status) == (
        trio.member, "webhook", "delivered", 1, 200)


def test_a_receiver_that_fails_twice_gets_the_third_retry(trio, quota, submit, receiver,
                                                         django_capture_on_commit_callbacks):
    hook = receiver(trio.member, statuses=[500, 503])
    workload = submit()
    with django_capture_on_commit_callbacks(execute=True):
        notifications_send(workload_id=workload.id, event="failed")
    assert len(hook.got) == 3 and all(g["signed"] for g in hook.got)
    assert len({g["body"] for g in hook.got}) == 1  # the same signed body each time
    note = Notification.objects.get()
    assert (note.state, note.attempts, note.last_status) == ("delivered", 3, 200)
    assert [retry_delay_s(n) for n in range(3)] == [30, 60, 120]  # backoff between the attempts


def test_a_receiver_that_never_answers_well_is_given_up_after_five_attempts(trio, quota, submit, receiver,
                                                                          django_capture_on_commit_callbacks):
    hook = receiver(trio.member, statuses=[500] * 10)
    with django_capture_on_commit_callbacks(execute=True):
        notifications_send(workload_id=submit().id, event="ended")
    note = Notification.objects.get()
    assert len(hook.got) == 5 and (note.state, note.attempts, note.last_error) == ("failed", 5, "HTTP 500")


def test_nothing_is_sent_for_other_users_workloads(trio, quota, submit, receiver,
                                                  django_capture_on_commit_callbacks):
    outsider_hook = receiver(trio.outsider)
    owner_hook = receiver(trio.owner)
    workload = submit()  # the member's, who chose no notifications
    with django_capture_on_commit_callbacks(execute=True):
        notifications_send(workload_id=workload.id, event="started")
    assert outsider_hook.got == [] and owner_hook.got == [] and not Notification.objects.exists()


def test_email_goes_to_the_submitter_once_per_event(trio, quota, submit, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    trio.member.email = "member@example.org"
    trio.member.save()
    preference_set(user=trio.member, events=["ended"], long_wait_minutes=60, email=True, webhook_url="")
    workload = submit()
    notifications_send(workload_id=workload.id, event="ended")
    notifications_send(workload_id=workload.id, event="ended")  # a repeated pass
    notifications_send(workload_id=workload.id, event="started")  # not chosen
    assert [m.to for m in mail.outbox] == [["member@example.org"]] and "ended" in mail.outbox[0].subject


def test_the_job_starting_at_its_destination_notifies_on_commit(trio, quota, make_cluster, submit, drive, receiver,
                                                                django_capture_on_commit_callbacks):
    hook = receiver(trio.member)
    make_cluster("onprem")
    workload = drive(submit())
    assert workload.state == "queued"
    with django_capture_on_commit_callbacks(execute=True):
        workload_apply_status(workload=workload, job=DestinationJob(
            job_id=workload.destination_job_id, workload_id=workload.uid, state=JobState.RUNNING))
    assert [g["event"] for g in hook.got] == ["started"] and hook.got[0]["signed"]


def test_a_long_wait_is_told_once(trio, quota, submit, receiver, django_capture_on_commit_callbacks):
    hook = receiver(trio.member)
    workload = submit()
    later = timezone.now() + timedelta(minutes=31)
    assert long_waits_notify(now=timezone.now()) == 0
    with django_capture_on_commit_callbacks(execute=True):
        assert long_waits_notify(now=later) == 1
        assert long_waits_notify(now=later) == 0
    assert [g["event"] for g in hook.got] == ["long_wait"]
    assert Workload.objects.get(id=workload.id).notifications.get().event == "long_wait"


def test_a_destination_refusing_the_job_tells_the_submitter_it_was_withdrawn(
        trio, quota, make_cluster, submit, drive, sim, receiver, django_capture_on_commit_callbacks):
    hook = receiver(trio.member)
    preference_set(user=trio.member, events=["withdrawn"], long_wait_minutes=30, email=False, webhook_url=hook.url)
    make_cluster("onprem")
    sim.get("onprem").set_faults(rejects="partition closed for maintenance")
    with django_capture_on_commit_callbacks(execute=True):
        workload = drive(submit())
    assert workload.state != "queued" and "onprem" in workload.tried_clusters
    assert [g["event"] for g in hook.got] == ["withdrawn"] and hook.got[0]["signed"]
    payload = json.loads(hook.got[0]["body"])
    assert payload["workload"]["uid"] == workload.uid and "partition closed" in payload["workload"]["reason"]


def test_the_long_wait_time_defaults_to_the_setting_and_the_beat_task_tells_it(trio, quota, submit, settings):
    from broker import tasks
    from broker.services.notifying.deliveries import preference_update

    settings.GPUBROKER_NOTIFY_LONG_WAIT_MINUTES = 5
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    trio.member.email = "member@example.org"
    trio.member.save()
    pref = preference_update(user=trio.member, events=["long_wait"], email=True)  # no time chosen
    assert pref.long_wait_minutes == 5
    assert settings.CELERY_BEAT_SCHEDULE["notify-long-waits"]["task"] == "broker.tasks.notify_long_waits"
    waiting, fresh = submit(name="waiting"), submit(name="fresh")
    Workload.objects.filter(id=waiting.id).update(created_at=timezone.now() - timedelta(minutes=6))
    tasks.notify_long_waits()  # the beat's task, on its own clock
    tasks.notify_long_waits()
    assert [m.subject for m in mail.outbox] == [f"GPU job waiting ({waiting.uid}): long wait"]
    assert not fresh.notifications.exists()


def test_a_long_wait_is_told_once_per_workload_on_each_chosen_channel(trio, quota, submit, receiver, settings,
                                                                    django_capture_on_commit_callbacks):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    trio.member.email = "member@example.org"
    trio.member.save()
    hook = receiver(trio.member)
    preference_set(user=trio.member, events=["long_wait"], long_wait_minutes=30, email=True, webhook_url=hook.url)
    first, second = submit(name="first"), submit(name="second")
    later = timezone.now() + timedelta(minutes=31)
    with django_capture_on_commit_callbacks(execute=True):
        assert long_waits_notify(now=later) == 4  # two workloads x (e-mail, webhook)
        assert long_waits_notify(now=later + timedelta(hours=5)) == 0
    assert sorted(json.loads(g["body"])["workload"]["uid"] for g in hook.got) == sorted([first.uid, second.uid])
    assert len(mail.outbox) == 2


def test_a_run_declared_dead_by_an_admin_tells_the_submitter_it_failed(
        trio, quota, make_cluster, submit, drive, sim, receiver, django_capture_on_commit_callbacks):
    from broker.services.following.recovery import workload_declare_dead

    hook = receiver(trio.member)
    make_cluster("onprem")
    workload = drive(submit())
    with django_capture_on_commit_callbacks(execute=True):
        workload_declare_dead(workload_id=workload.id, actor=trio.owner, why="node rebooted, job gone")
        workload_declare_dead(workload_id=workload.id, actor=trio.owner, why="again")  # already ended: no more
    assert [g["event"] for g in hook.got] == ["failed"] and hook.got[0]["signed"]
    assert "declared dead" in json.loads(hook.got[0]["body"])["workload"]["reason"]
