"""What the REST API itself must remember: the Idempotency-Key of each workload creation."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from broker.models import Workload
from broker.models.fields import created_at_field


class IdempotencyKey(models.Model):
    """One row per (user, key): the unique constraint is what makes two concurrent
    retries of one POST create one workload, whatever the database."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=200)
    request_hash = models.CharField(max_length=64, help_text="SHA-256 of the request body, to refuse reuse")
    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="+")
    created_at = created_at_field()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="idempotency_key_unique_per_user")]

    def __str__(self) -> str:
        return f"{self.user} {self.key} -> {self.workload_id}"
