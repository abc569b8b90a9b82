"""Accounting: the usage ledger, cloud bills, GPU-hour rates and reconciliation results.

Models hold fields, choices and constraints only; every write goes through
``accounting.services`` and every read through ``accounting.selectors``.
"""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models

from broker.models import Cluster, GpuClass, Workload
from portal.tenancy.models import Project, Tenant


class UsageSource(models.TextChoices):
    SLURM = "slurm", "Slurm sacct"
    KUEUE = "kueue", "Kueue"
    VOLCANO = "volcano", "Volcano"
    SIMULATOR = "simulator", "Fleet simulator"


class UsageEntry(models.Model):
    """GPU-seconds of one scheduler job, as the scheduler recorded them.

    Append-only: (source, cluster, job_id) is unique, so reading the same period twice
    adds nothing.  The one allowed change is a still-running job (``end`` empty) getting
    its later end and GPU-seconds."""

    source = models.CharField(max_length=20, choices=UsageSource.choices)
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="usage_entries")
    job_id = models.CharField(max_length=200)
    workload_uid = models.CharField(max_length=40, blank=True, help_text="The workload id the scheduler carried")
    workload = models.ForeignKey(
        Workload, null=True, blank=True, on_delete=models.SET_NULL, related_name="usage_entries"
    )
    account = models.CharField(max_length=100, blank=True, help_text="Slurm account or namespace, raw")
    cluster_user = models.CharField(max_length=100, blank=True, help_text="The user the job ran as at the cluster, raw")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="usage_entries",
        help_text="Who is charged: the workload's submitter, else the person whose cluster "
        "identity the job ran as; empty: nobody known",
    )
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.PROTECT, related_name="usage_entries")
    project = models.ForeignKey(
        Project,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="usage_entries",
        help_text="Empty: the account matched no project",
    )
    gpu_model = models.CharField(max_length=100, blank=True)
    gpu_class = models.ForeignKey(
        GpuClass, null=True, blank=True, on_delete=models.PROTECT, related_name="usage_entries"
    )
    gpus = models.PositiveIntegerField()
    start = models.DateTimeField()
    end = models.DateTimeField(null=True, blank=True, help_text="Empty: still running when last read")
    gpu_seconds = models.BigIntegerField(validators=[MinValueValidator(0)])
    state = models.CharField(max_length=40, blank=True)
    # charged to nobody (``UsageWaiver``): a job whose pre-flight GPU check failed; the raw
    # insert of the ingest leaves it to the database's default
    waived = models.BooleanField(default=False, db_default=False)
    ingested_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-start", "id"]
        verbose_name_plural = "usage entries"
        constraints = [
            models.UniqueConstraint(fields=["source", "cluster", "job_id"], name="usage_entry_unique_job"),
        ]
        indexes = [
            models.Index(fields=["cluster", "end"]),
            models.Index(fields=["project", "end"]),
            models.Index(fields=["tenant", "end"]),
        ]

    def __str__(self) -> str:
        return f"{self.source}:{self.cluster_id}:{self.job_id}"


class UsageWaiver(models.Model):
    """A scheduler job the broker charges to nobody, whether its usage is read before or
    after: one that ended because its pre-flight GPU check failed on a node."""

    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="usage_waivers")
    job_id = models.CharField(max_length=200)
    reason = models.CharField(max_length=300)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "job_id"], name="usage_waiver_unique_job")]

    def __str__(self) -> str:
        return f"{self.cluster_id}:{self.job_id}"


class UsageWatermark(models.Model):
    """The last ingested end time per cluster: where the next ``usage(since=...)`` starts."""

    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, related_name="usage_watermark")
    last_end = models.DateTimeField()
    last_collected_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)


class BillProvider(models.TextChoices):
    AWS = "aws", "AWS Cost and Usage Report (CSV)"
    GCP = "gcp", "Google Cloud billing export (CSV)"
    AZURE = "azure", "Azure cost details (CSV)"


class BillImport(models.Model):
    """One uploaded bill file; its sha256 makes a second upload of the same file a no-op."""

    provider = models.CharField(max_length=10, choices=BillProvider.choices)
    tenant = models.ForeignKey(
        Tenant,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="bills",
        help_text="Whose cloud account; empty: organisation-wide (operators)",
    )
    cluster = models.ForeignKey(
        Cluster,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="bills",
        help_text="The cloud cluster the bill covers, for reconciliation",
    )
    file_name = models.CharField(max_length=255)
    sha256 = models.CharField(max_length=64, unique=True)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    uploaded_at = models.DateTimeField(auto_now_add=True)
    line_count = models.PositiveIntegerField(default=0)
    matched_count = models.PositiveIntegerField(default=0)
    total_cost = models.DecimalField(max_digits=16, decimal_places=4, default=Decimal("0"))
    currency = models.CharField(max_length=3, blank=True)
    period_start = models.DateTimeField(null=True, blank=True)
    period_end = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-uploaded_at", "-id"]

    def __str__(self) -> str:
        return self.file_name


class BillLine(models.Model):
    """One line of a bill.  Kept even when it matches no project: unmatched, never dropped."""

    bill = models.ForeignKey(BillImport, on_delete=models.CASCADE, related_name="lines")
    line_no = models.PositiveIntegerField()
    usage_start = models.DateTimeField()
    resource_id = models.CharField(max_length=500, blank=True)
    description = models.CharField(max_length=500, blank=True, help_text="Instance type, SKU or meter")
    usage_amount = models.DecimalField(max_digits=20, decimal_places=6)
    cost = models.DecimalField(max_digits=16, decimal_places=6)
    currency = models.CharField(max_length=3, blank=True)
    tags = models.JSONField(default=dict, blank=True)
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.PROTECT, related_name="bill_lines")
    project = models.ForeignKey(Project, null=True, blank=True, on_delete=models.PROTECT, related_name="bill_lines")
    workload = models.ForeignKey(Workload, null=True, blank=True, on_delete=models.SET_NULL, related_name="bill_lines")
    workload_uid = models.CharField(max_length=40, blank=True)
    gpu_class = models.ForeignKey(GpuClass, null=True, blank=True, on_delete=models.PROTECT, related_name="bill_lines")

    class Meta:
        ordering = ["bill_id", "line_no"]
        constraints = [models.UniqueConstraint(fields=["bill", "line_no"], name="bill_line_unique")]
        indexes = [models.Index(fields=["project", "usage_start"]), models.Index(fields=["usage_start"])]


class RateSource(models.TextChoices):
    DIRECT = "direct", "Set directly"
    TCO = "tco", "From a TCO entry"


class GpuRate(models.Model):
    """Price per GPU-hour of a GPU class on-prem, valid from a date until the next one.

    With ``cluster`` empty the rate holds for the class on every on-prem cluster; a
    cluster-specific rate wins.  The TCO inputs are kept beside the price they gave."""

    gpu_class = models.ForeignKey(GpuClass, on_delete=models.PROTECT, related_name="rates")
    cluster = models.ForeignKey(Cluster, null=True, blank=True, on_delete=models.CASCADE, related_name="rates")
    valid_from = models.DateField()
    price_per_gpu_hour = models.DecimalField(
        max_digits=12, decimal_places=4, validators=[MinValueValidator(Decimal("0"))]
    )
    source = models.CharField(max_length=10, choices=RateSource.choices, default=RateSource.DIRECT)
    tco = models.JSONField(default=dict, blank=True, help_text="TCO inputs when source is tco")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["gpu_class__slug", "-valid_from"]
        # Two partial constraints rather than one with nulls_distinct=False: SQLite (the
        # laptop's database) cannot enforce that option, and a fleet-wide rate (no cluster)
        # must be one per class and day there too.
        constraints = [
            models.UniqueConstraint(
                fields=["gpu_class", "cluster", "valid_from"],
                condition=models.Q(cluster__isnull=False),
                name="rate_unique_per_cluster",
            ),
            models.UniqueConstraint(
                fields=["gpu_class", "valid_from"],
                condition=models.Q(cluster__isnull=True),
                name="rate_unique_fleet_wide",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.gpu_class.slug} from {self.valid_from}: {self.price_per_gpu_hour}/GPU-h"


class ReconciliationRun(models.Model):
    """The latest reconciliation of one cluster for one month; a rerun replaces it."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="reconciliations")
    period = models.DateField(help_text="First day of the month")
    ran_at = models.DateTimeField()
    ran_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    tolerance = models.FloatField()
    cluster_stale = models.BooleanField(default=False)
    workloads = models.PositiveIntegerField(default=0)
    jobs = models.PositiveIntegerField(default=0)
    bill_lines = models.PositiveIntegerField(default=0)
    broker_gpu_seconds = models.BigIntegerField(default=0)
    scheduler_gpu_seconds = models.BigIntegerField(default=0)
    bill_cost = models.DecimalField(max_digits=16, decimal_places=4, default=Decimal("0"))

    class Meta:
        ordering = ["-period", "cluster__name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "period"], name="reconciliation_unique")]


class DiscrepancyKind(models.TextChoices):
    MISSING_IN_SCHEDULER = "missing_in_scheduler", "Broker ran it, the scheduler has no record"
    MISSING_IN_BROKER = "missing_in_broker", "Scheduler names a workload the broker does not know"
    JOB_WITHOUT_BROKER = "job_without_broker", "Job ran without the broker"
    HOURS_DIFFER = "hours_differ", "GPU-hours differ beyond tolerance"
    UNMATCHED_ACCOUNT = "unmatched_account", "Account matches no project"
    BILL_WITHOUT_JOB = "bill_without_job", "Bill line with no job"
    MISSING_IN_BILL = "missing_in_bill", "Job with no bill line"


class Discrepancy(models.Model):
    run = models.ForeignKey(ReconciliationRun, on_delete=models.CASCADE, related_name="discrepancies")
    kind = models.CharField(max_length=30, choices=DiscrepancyKind.choices)
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey(Project, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    workload = models.ForeignKey(Workload, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    usage_entry = models.ForeignKey(UsageEntry, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    bill_line = models.ForeignKey(BillLine, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    job_id = models.CharField(max_length=200, blank=True)
    broker_gpu_seconds = models.BigIntegerField(null=True, blank=True)
    scheduler_gpu_seconds = models.BigIntegerField(null=True, blank=True)
    bill_cost = models.DecimalField(max_digits=16, decimal_places=6, null=True, blank=True)
    message = models.CharField(max_length=500)

    class Meta:
        ordering = ["run_id", "kind", "id"]
        verbose_name_plural = "discrepancies"


class CloudTcoReading(models.Model):
    """A tenant's cloud spend in a month beside the on-prem TCO of the same GPU-hours, as the
    last check read it (``accounting.services.cloud_tco``).  ``crossed_at`` is set once, the
    first time the spend passed the policy's share of that TCO: finance and the tenant's
    admins are told then, and the policy's cloud-burst action applies for the rest of the
    month."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="cloud_tco_readings")
    month = models.DateField(help_text="The first day of the month")
    cloud_spend = models.DecimalField(max_digits=16, decimal_places=2)
    onprem_tco = models.DecimalField(max_digits=16, decimal_places=2)
    share_limit = models.FloatField(help_text="The policy's share of on-prem TCO at the last check")
    action = models.CharField(max_length=10, default="warn", help_text="The policy's burst.over_tco at the last check")
    crossed_at = models.DateTimeField(null=True, blank=True)
    checked_at = models.DateTimeField()

    class Meta:
        ordering = ["-month", "tenant_id"]
        constraints = [models.UniqueConstraint(fields=["tenant", "month"], name="cloud_tco_reading_once_a_month")]

    @property
    def share(self) -> float | None:
        return float(self.cloud_spend / self.onprem_tco) if self.onprem_tco > 0 else None


class BudgetAlert(models.Model):
    """A GPU-hour budget's threshold crossed in one period, recorded once: the tenant's
    admins, finance and the class's quota owner are told when the row is written
    (``accounting.services.budgets``).  The budget is the policy's, named by its key."""

    class Level(models.TextChoices):
        WARN = "warn", "past its warning share"
        OVER = "over", "used and held past the budget"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="budget_alerts")
    budget = models.CharField(max_length=200, help_text="tenant[/project] class per period, as the policy names it")
    period_start = models.DateField()
    level = models.CharField(max_length=10, choices=Level.choices)
    message = models.TextField()
    told_at = models.DateTimeField()

    class Meta:
        ordering = ["-told_at"]
        constraints = [
            models.UniqueConstraint(fields=["budget", "period_start", "level"], name="budget_alert_once_a_period")
        ]
