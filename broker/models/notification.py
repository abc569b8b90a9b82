"""What each user wants to be told about their own workloads, and every message sent."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models

from broker.lifecycle import DeliveryState

from broker.models.fields import created_at_field, TouchedAtField

EVENTS = ("started", "ended", "failed", "withdrawn", "preempted", "long_wait")


def new_webhook_secret() -> str:
    return secrets.token_urlsafe(32)


class NotificationPreference(models.Model):
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_preference"
    )
    events = models.JSONField(default=list, blank=True, help_text=f"Any of {', '.join(EVENTS)}")
    long_wait_minutes = models.PositiveIntegerField(default=60)
    email = models.BooleanField(default=False)
    webhook_url = models.URLField(blank=True, max_length=500)
    webhook_secret = models.CharField(max_length=64, default=new_webhook_secret)
    updated_at = TouchedAtField()


class Channel(models.TextChoices):
    EMAIL = "email", "E-mail"
    WEBHOOK = "webhook", "Webhook"


class Notification(models.Model):
    """One message to one user about one event of their workload, on one channel; every
    webhook attempt updates it.  Unique per (user, workload, event, channel): told once."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications")
    workload = models.ForeignKey("broker.Workload", on_delete=models.CASCADE, related_name="notifications")
    event = models.CharField(max_length=20)
    channel = models.CharField(max_length=10, choices=Channel.choices)
    target = models.CharField(max_length=500, help_text="The address or URL it went to")
    body = models.TextField()
    state = models.CharField(max_length=10, choices=DeliveryState.choices, default=DeliveryState.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_status = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    created_at = created_at_field()
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "workload", "event", "channel"], name="notify_once_per_event_and_channel"
            )
        ]
