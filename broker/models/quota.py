"""Global quota per tenant x GPU class, and the reservations counted against it."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from broker.models.fields import created_at_field, TouchedAtField

from broker.lifecycle import LIVE_RESERVATION_STATES, ReservationState  # noqa: F401  (re-exported)
from broker.models.fleet import Cluster, GpuClass
from portal.tenancy.models import Tenant


class Quota(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="quotas")
    gpu_class = models.ForeignKey(GpuClass, on_delete=models.PROTECT, related_name="quotas")
    limit_gpus = models.PositiveIntegerField()
    borrow_limit_gpus = models.PositiveIntegerField(default=0)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="owned_quotas",
        help_text="Who answers for this quota",
    )
    alert_share = models.FloatField(
        default=0.8,
        validators=[MinValueValidator(0.01), MaxValueValidator(1.0)],
        help_text="The owner gets an e-mail when use passes this share of the limit (once per crossing)",
    )
    alert_active = models.BooleanField(
        default=False, help_text="Use is past the alert share and the owner was told; cleared below it"
    )
    updated_at = TouchedAtField()

    class Meta:
        ordering = ["tenant__slug", "gpu_class__slug"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "gpu_class"], name="quota_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.tenant.slug}/{self.gpu_class.slug}: {self.limit_gpus}+{self.borrow_limit_gpus}"

    @property
    def ceiling(self) -> int:
        return self.limit_gpus + self.borrow_limit_gpus


class Reservation(models.Model):
    """A promise to try: GPUs counted against the quota from placement until the job ends.

    ACTIVE until the destination acknowledges the job, CONFIRMED while it is queued or
    running there, then RELEASED; an ACTIVE one past ``expires_at`` that the destination
    never acknowledged becomes EXPIRED."""

    workload = models.ForeignKey("broker.Workload", on_delete=models.CASCADE, related_name="reservations")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="reservations")
    gpu_class = models.ForeignKey(GpuClass, on_delete=models.PROTECT, related_name="reservations")
    cluster = models.ForeignKey(Cluster, null=True, blank=True, on_delete=models.SET_NULL, related_name="reservations")
    gpus = models.PositiveIntegerField()
    state = models.CharField(max_length=20, choices=ReservationState.choices, default=ReservationState.ACTIVE)
    expires_at = models.DateTimeField()
    created_at = created_at_field()
    confirmed_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["tenant", "gpu_class", "state"])]
        constraints = [
            # at most one live reservation per workload: a retry never double-counts
            models.UniqueConstraint(
                fields=["workload"],
                condition=models.Q(state__in=["active", "confirmed"]),
                name="one_live_reservation_per_workload",
            ),
        ]
