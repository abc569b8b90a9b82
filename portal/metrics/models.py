"""Fleet figures sampled on the beat schedule, so the charts keep their history across restarts.

Cluster and class are kept as names, not foreign keys: a sample is a record of what was,
and must outlive a renamed pool or a class dropped from the policy.
"""

from __future__ import annotations

from decimal import Decimal

from django.db import models

from portal.tenancy.models import Tenant


class CapacitySample(models.Model):
    """GPUs of one cluster x GPU class x resource at one instant.

    ``resource`` is ``gpu`` for whole GPUs, ``mig-<profile>`` for MIG slices and
    ``shares-<kind>`` for shares of a GPU, which are counted apart: a slice or a share is not a
    GPU."""

    taken_at = models.DateTimeField(db_index=True)
    cluster = models.CharField(max_length=63)
    location = models.CharField(max_length=10)
    gpu_class = models.CharField(max_length=40)
    resource = models.CharField(max_length=30)
    total = models.PositiveIntegerField()
    allocatable = models.PositiveIntegerField()
    allocated = models.PositiveIntegerField()
    reserved = models.PositiveIntegerField()
    idle = models.PositiveIntegerField()

    class Meta:
        ordering = ["taken_at", "cluster", "gpu_class", "resource"]


class FigureSample(models.Model):
    """One tenant's queue and spend figures at one instant (kept per tenant for scoping)."""

    taken_at = models.DateTimeField(db_index=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="figure_samples")
    queue_depth = models.PositiveIntegerField()
    started = models.PositiveIntegerField(help_text="Workloads started in the window before the sample")
    queue_wait_p95_s = models.FloatField(null=True)
    time_to_first_gpu_p95_s = models.FloatField(null=True)
    cloud_spend_month = models.DecimalField(max_digits=14, decimal_places=2, default=Decimal("0"))

    class Meta:
        ordering = ["taken_at", "tenant_id"]


class TaskFailureCount(models.Model):
    """How many times a Celery task has failed, since the row was made (a counter for
    ``/metrics``).  Kept in the database because failures happen in the workers while the
    scrape is answered by the web process: a count in a worker's memory would be invisible
    there and lost with the worker."""

    task = models.CharField(max_length=200, unique=True)
    failures = models.PositiveBigIntegerField(default=0)
    last_failed_at = models.DateTimeField(null=True)

    class Meta:
        ordering = ["task"]
