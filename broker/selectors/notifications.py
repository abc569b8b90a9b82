"""Reads of a user's own notification settings (nobody reads another's)."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.conf import settings

from broker.models import Notification, NotificationPreference


def notification_preference_get(*, user: User) -> NotificationPreference:
    """The user's stored choices, or the unsaved defaults (nothing chosen yet; the long-wait
    time from ``GPUBROKER_NOTIFY_LONG_WAIT_MINUTES``)."""
    found = NotificationPreference.objects.filter(user=user).first()
    if found is not None:
        return found
    return NotificationPreference(
        user=user,
        events=[],
        email=False,
        webhook_url="",
        webhook_secret="",
        long_wait_minutes=settings.GPUBROKER_NOTIFY_LONG_WAIT_MINUTES,
    )


def notifications_sent(*, user: User, limit: int = 50):
    return Notification.objects.filter(user=user).select_related("workload")[:limit]
