"""Telling a workload's submitter what happened to it: e-mail (Django's mail) and a signed
webhook, as each user chose.  Lifecycle services call ``notify_on_commit``; the work runs in
a task after the state change is stored, so a slow receiver never holds a transaction.

The webhook body is signed with HMAC-SHA256 under the user's own secret; the signature is in
the ``X-GPUBroker-Signature`` header as ``sha256=<hex>``.  A failed delivery is retried with
exponential backoff by the task; every attempt is recorded on its Notification row.  The
URL must be a public http(s) one, checked when saved and again as each delivery connects
(``webhook_guard``); a refused delivery sends nothing and is not retried.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from datetime import datetime, timedelta

import requests
from django.contrib.auth.models import User
from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction

from broker.models import (
    Channel,
    DeliveryState,
    Notification,
    NotificationPreference,
    Workload,
    WorkloadState,
)
from broker.lifecycle import WAITING_STATES
from broker.models.notification import EVENTS, new_webhook_secret
from broker.selectors.notifications import notification_preference_get
from broker.services.records import moves
from broker.services.records import tasks_bridge
from broker.services.records.audit import audit
from broker.services.submitting.webhook_guard import UnsafeWebhookUrl, webhook_session, webhook_url_check
from broker import runtime
from portal.tenancy.errors import DomainError

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-GPUBroker-Signature"
WEBHOOK_TIMEOUT_S = 10
WEBHOOK_MAX_ATTEMPTS = 5
RETRY_BASE_S = 30  # then 60, 120, 240: a receiver down for a few minutes still gets it
LONG_WAIT_MAX_MINUTES = 100_000
PREFERENCE_FIELDS = frozenset({"events", "long_wait_minutes", "email", "webhook_url"})

ENDED_EVENTS = {
    WorkloadState.COMPLETED: "ended",
    WorkloadState.FAILED: "failed",
    WorkloadState.CANCELLED: "ended",
    WorkloadState.REJECTED: "failed",
}


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def retry_delay_s(retries: int) -> int:
    return int(RETRY_BASE_S * 2**retries)


def notify_on_commit(*, workload_id: int, event: str) -> None:
    """Queue the notification once the caller's transaction commits (no-op when rolled back)."""
    assert event in EVENTS, event
    tasks_bridge.enqueue_notification(workload_id, event)


class PreferenceRefused(DomainError, ValueError):
    """A choice that may not be stored; ``field`` names what to fix."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(message)


@transaction.atomic
def preference_set(
    *, user: User, events: list[str], long_wait_minutes: int, email: bool, webhook_url: str
) -> NotificationPreference:
    unknown = sorted(set(events) - set(EVENTS))
    if unknown:
        raise PreferenceRefused("events", f"unknown events: {', '.join(unknown)}; choose from {', '.join(EVENTS)}.")
    if not 1 <= long_wait_minutes <= LONG_WAIT_MAX_MINUTES:
        raise PreferenceRefused("long_wait_minutes", f"must be from 1 to {LONG_WAIT_MAX_MINUTES}.")
    try:
        webhook_url_check(webhook_url)
    except UnsafeWebhookUrl as exc:
        raise PreferenceRefused(exc.field, str(exc)) from None
    pref, _ = NotificationPreference.objects.update_or_create(
        user=user,
        defaults={
            "events": sorted(set(events)),
            "long_wait_minutes": long_wait_minutes,
            "email": email,
            "webhook_url": webhook_url,
        },
    )
    audit(
        action="notifications.preferences_set",
        actor=user,
        message=f"events: {', '.join(pref.events) or 'none'}; e-mail {'on' if email else 'off'}; "
        f"webhook {'set' if webhook_url else 'off'}; long wait after {long_wait_minutes} min",
        inputs={
            "events": pref.events,
            "email": email,
            "webhook_url": webhook_url,
            "long_wait_minutes": long_wait_minutes,
        },
    )
    return pref


def preference_update(*, user: User, **changes: object) -> NotificationPreference:
    """Change only the given choices (the API's PATCH); the rest stay as stored."""
    unknown = sorted(set(changes) - PREFERENCE_FIELDS)
    if unknown:
        raise PreferenceRefused(unknown[0], "Unknown field.")
    current = notification_preference_get(user=user)
    values = {name: getattr(current, name) for name in PREFERENCE_FIELDS}
    return preference_set(user=user, **{**values, **changes})


def secret_rotate(*, user: User) -> NotificationPreference:
    pref, _ = NotificationPreference.objects.get_or_create(
        user=user, defaults={"long_wait_minutes": settings.GPUBROKER_NOTIFY_LONG_WAIT_MINUTES}
    )
    pref.webhook_secret = new_webhook_secret()
    pref.save(update_fields=["webhook_secret", "updated_at"])
    audit(action="notifications.secret_rotated", actor=user, message="a new webhook secret was made")
    return pref


def _body(workload: Workload, event: str, now: datetime) -> str:
    return json.dumps(
        {
            "event": event,
            "sent_at": now.isoformat(),
            "workload": {
                "id": workload.id,
                "uid": workload.uid,
                "name": workload.name,
                "state": workload.state,
                "project": workload.project.slug,
                "cluster": workload.cluster.name if workload.cluster else None,
                "reason": workload.raw_reason[:500],
            },
        },
        sort_keys=True,
    )


def notifications_send(*, workload_id: int, event: str, now: datetime | None = None) -> list[Notification]:
    """Only the workload's submitter is told, on the channels they chose, once per event."""
    now = now or runtime.now()
    workload = Workload.objects.select_related("project", "cluster", "submitted_by").get(id=workload_id)
    user = workload.submitted_by
    pref = NotificationPreference.objects.filter(user=user).first() if user else None
    if pref is None or event not in pref.events:
        return []
    assert user is not None  # no submitter, no preference
    body = _body(workload, event, now)
    made = []
    if pref.email and user.email:
        made += _record(user, workload, event, Channel.EMAIL, user.email, body)
    if pref.webhook_url:
        made += _record(user, workload, event, Channel.WEBHOOK, pref.webhook_url, body)
    for note in made:
        if note.channel == Channel.EMAIL:
            _mail(note, workload, event)
        else:
            tasks_bridge.enqueue_webhook(note.id)
    return made


def _record(user: User, workload: Workload, event: str, channel: str, target: str, body: str) -> list[Notification]:
    try:
        with transaction.atomic():
            return [
                Notification.objects.create(
                    user=user, workload=workload, event=event, channel=channel, target=target, body=body
                )
            ]
    except IntegrityError:
        return []  # told already (a repeated pass)


def _mail(note: Notification, workload: Workload, event: str) -> None:
    subject = f"GPU job {workload.name} ({workload.uid}): {event.replace('_', ' ')}"
    try:
        send_mail(subject, f"{subject}.\n\n{note.body}\n", settings.DEFAULT_FROM_EMAIL, [note.target])
    except OSError as exc:
        moves.delivery_done(delivered=False, pk=note.id, fields={"attempts": 1, "last_error": str(exc)[:500]})
        return
    moves.delivery_done(delivered=True, pk=note.id, fields={"attempts": 1, "delivered_at": runtime.now()})


def webhook_attempt(*, notification_id: int) -> int:
    """One POST of the stored body, signed with the user's secret now; records the attempt.
    Returns the number of attempts so far when another one should follow, else 0 (delivered,
    already done, or the last attempt failed: then it is marked failed for good)."""
    note = Notification.objects.select_related("user__notification_preference").get(id=notification_id)
    if note.state != DeliveryState.PENDING:
        return 0
    body = note.body.encode()
    secret = note.user.notification_preference.webhook_secret
    status, error, refused = None, "", False
    try:
        webhook_url_check(note.target)  # the scheme; the addresses are vetted again as it connects
        with webhook_session() as session:
            response = session.post(
                note.target,
                data=body,
                timeout=WEBHOOK_TIMEOUT_S,
                allow_redirects=False,
                headers={
                    "Content-Type": "application/json",
                    SIGNATURE_HEADER: sign(secret, body),
                    "X-GPUBroker-Event": note.event,
                },
            )
        status = response.status_code
        ok = 200 <= status < 300
        error = "" if ok else f"HTTP {status}"
    except UnsafeWebhookUrl as exc:  # nothing was sent; trying again would not change that
        ok, refused, error = False, True, f"refused: the URL {exc}"[:500]
    except requests.RequestException as exc:
        ok, error = False, str(exc)[:500]
    attempts = note.attempts + 1
    final = refused or attempts >= WEBHOOK_MAX_ATTEMPTS
    fields = {
        "attempts": attempts,
        "last_status": status,
        "last_error": error,
        "delivered_at": runtime.now() if ok else None,
    }
    if ok or final:
        moves.delivery_done(delivered=ok, pk=note.id, fields=fields)
    else:
        moves.delivery_retry(pk=note.id, fields=fields)
    return 0 if ok or final else attempts


def long_waits_notify(*, now: datetime | None = None) -> int:
    """Tell users who asked for it about their workloads waiting longer than their limit."""
    now = now or runtime.now()
    sent = 0
    # JSON list containment differs between SQLite and PostgreSQL: the few preferences are filtered here
    for pref in NotificationPreference.objects.all():
        if "long_wait" not in pref.events:
            continue
        waiting = (
            Workload.objects.filter(
                submitted_by_id=pref.user_id,
                started_at__isnull=True,
                created_at__lt=now - timedelta(minutes=pref.long_wait_minutes),
            )
            .filter(state__in=WAITING_STATES)
            .exclude(notifications__event="long_wait")
        )
        for workload_id in waiting.values_list("id", flat=True):
            sent += len(notifications_send(workload_id=workload_id, event="long_wait", now=now))
    return sent
