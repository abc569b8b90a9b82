"""Policy versions, append-only: content never changes once written, only the state moves.

The lifecycle is its table in ``broker.lifecycle``; every move is one ``PolicyTransition`` row
(and one audit record), so who proposed, approved, activated and retired what stays on file.
The one ACTIVE version is the policy in force.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from broker.lifecycle import ImpactState, ReleaseState
from broker.models.fields import created_at_field


S = ReleaseState


class PolicyRelease(models.Model):
    number = models.PositiveIntegerField(unique=True, help_text="1, 2, 3... in order of creation")
    content = models.TextField(editable=False)
    version = models.CharField(
        max_length=64, db_index=True, editable=False, help_text="Content hash, recorded on every placement decision"
    )
    summary = models.CharField(max_length=300, blank=True)
    source = models.CharField(max_length=300, blank=True, help_text="File it was seeded or imported from")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="owned_policy_releases",
        help_text="Who must approve it",
    )
    approver = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    state = models.CharField(max_length=20, choices=ReleaseState.choices, default=ReleaseState.DRAFT)
    was_active = models.BooleanField(default=False, help_text="Has been in force: a rollback target")
    created_at = created_at_field()
    proposed_at = models.DateTimeField(null=True, blank=True)
    approved_at = models.DateTimeField(null=True, blank=True)
    activated_at = models.DateTimeField(null=True, blank=True)
    retired_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-number"]
        constraints = [
            models.UniqueConstraint(
                fields=["state"], condition=models.Q(state="active"), name="one_active_policy_release"
            ),
        ]

    def __str__(self) -> str:
        return f"v{self.number} ({self.version}, {self.state})"


class PolicyTransition(models.Model):
    """One move of a release through the lifecycle; rows are only ever added."""

    release = models.ForeignKey(PolicyRelease, on_delete=models.PROTECT, related_name="transitions")
    from_state = models.CharField(max_length=20, choices=ReleaseState.choices, blank=True)
    to_state = models.CharField(max_length=20, choices=ReleaseState.choices)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    message = models.CharField(max_length=300, blank=True)
    at = created_at_field()

    class Meta:
        ordering = ["at", "id"]


class ImpactReplay(models.Model):
    """The fleet's recent history replayed under the active and a proposed release."""

    release = models.ForeignKey(PolicyRelease, on_delete=models.CASCADE, related_name="impacts")
    baseline = models.ForeignKey(PolicyRelease, null=True, on_delete=models.SET_NULL, related_name="+")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    state = models.CharField(max_length=20, choices=ImpactState.choices, default=ImpactState.QUEUED)
    progress = models.PositiveSmallIntegerField(default=0, help_text="percent")
    message = models.CharField(max_length=500, blank=True)
    result = models.JSONField(default=dict, blank=True)
    created_at = created_at_field()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
