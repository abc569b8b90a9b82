"""A researcher's request for more GPUs of a class for a project, for a while."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from broker.lifecycle import QuotaRequestState

from broker.models.fields import created_at_field

from broker.models.quota import Quota
from portal.tenancy.models import Project


class QuotaRequest(models.Model):
    quota = models.ForeignKey(Quota, on_delete=models.CASCADE, related_name="requests")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="quota_requests")
    requester = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="quota_requests")
    extra_gpus = models.PositiveIntegerField(help_text="GPUs on top of the limit")
    reason = models.TextField()
    ends_on = models.DateField(help_text="The raise lasts to the end of this day (UTC)")
    state = models.CharField(max_length=10, choices=QuotaRequestState.choices, default=QuotaRequestState.PENDING)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="quota_requests_decided",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    note = models.TextField(blank=True, help_text="The owner's note with the decision")
    ended_at = models.DateTimeField(null=True, blank=True)
    created_at = created_at_field()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["state", "ends_on"])]

    def __str__(self) -> str:
        return f"+{self.extra_gpus} {self.quota} until {self.ends_on} ({self.state})"
