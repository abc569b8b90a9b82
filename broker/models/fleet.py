"""The fleet as the broker knows it: GPU classes, clusters and their pools."""

from __future__ import annotations

from decimal import Decimal
from typing import Mapping

from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Value

from broker.cluster_report import NodeInventory

credentials_ref_validator = RegexValidator(
    r"^(|env:[A-Z_][A-Z0-9_]*|file:/\S+)$",
    "a reference, never the secret: env:VAR_NAME or file:/absolute/path",
)


class GpuClass(models.Model):
    """What a quota is counted in: a family of interchangeable GPU models."""

    slug = models.SlugField(max_length=40, unique=True)
    name = models.CharField(max_length=100)
    gpu_models = models.JSONField(default=list, help_text="GPU model names in this class")
    min_memory_gb = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["slug"]
        verbose_name_plural = "GPU classes"

    def __str__(self) -> str:
        return self.slug


class ClusterKind(models.TextChoices):
    SLURM = "slurm", "Slurm"
    KUEUE = "kueue", "Kubernetes + Kueue"
    VOLCANO = "volcano", "Kubernetes + Volcano"
    MULTIKUEUE = "multikueue", "MultiKueue manager"
    SIMULATOR = "simulator", "Fleet simulator"


class Location(models.TextChoices):
    ONPREM = "onprem", "On-prem"
    CLOUD = "cloud", "Cloud"


class ClusterHealth(models.TextChoices):
    UNKNOWN = "unknown", "Not yet reported"
    HEALTHY = "healthy", "Healthy"
    STALE = "stale", "Stale"
    DRAINING = "draining", "Draining"


class Cluster(models.Model):
    name = models.SlugField(max_length=63, unique=True)
    kind = models.CharField(max_length=20, choices=ClusterKind.choices)
    region = models.CharField(max_length=63)
    location = models.CharField(max_length=10, choices=Location.choices)
    price_per_gpu_hour = models.DecimalField(
        max_digits=10, decimal_places=4, default=Decimal("0"), validators=[MinValueValidator(Decimal("0"))]
    )
    egress_per_gb = models.DecimalField(
        max_digits=10, decimal_places=4, default=Decimal("0"), validators=[MinValueValidator(Decimal("0"))]
    )
    config = models.JSONField(default=dict, blank=True, help_text="Backend settings; never secrets")
    credentials_ref = models.CharField(
        max_length=300,
        blank=True,
        validators=[credentials_ref_validator],
        help_text="Where the secret lives (env:VAR or file:/path); the secret itself is never stored",
    )
    enabled = models.BooleanField(default=True)
    draining = models.BooleanField(default=False, help_text="No new placements; running jobs continue")
    health = models.CharField(max_length=20, choices=ClusterHealth.choices, default=ClusterHealth.UNKNOWN)
    last_inventory_at = models.DateTimeField(null=True, blank=True)
    # the last report whose numbers differed from the one before: workloads that found no
    # place before it are looked at again in the next pass, whatever their pause
    capacity_changed_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    stale_since = models.DateTimeField(null=True, blank=True)
    queue_pending_jobs = models.PositiveIntegerField(default=0)
    queue_pending_gpus = models.PositiveIntegerField(default=0)
    queue_pending_by_scope = models.JSONField(
        default=dict,
        # in the database too: the previous release's workers insert clusters without this
        # column while the new release migrates (expand-then-contract; tests/upgrade/)
        db_default=Value({}, output_field=models.JSONField()),
        blank=True,
        help_text="Pending GPUs per account, as last reported (Slurm): under fair share, whose "
        "pending jobs start before a new one depends on its account",
    )
    throughput_gpu_hours_per_hour = models.FloatField(default=0.0)
    local_limits = models.JSONField(
        default=dict,
        blank=True,
        help_text="What local admission allows, as last reported with the inventory: per-job caps "
        "(QoS, partition) and group quotas with their use (association, ClusterQueue, queue)",
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


# What a cluster's report says of a pool, shown as it is in the admin and the API.
POOL_REPORT_FIELDS = (
    "name",
    "gpu_model",
    "gpu_memory_gb",
    "partitioning",
    "owner",
    "gpus_total",
    "gpus_allocatable",
    "gpus_allocated",
    "gpus_reserved",
    "gpus_idle",
    "taken_at",
)


class GpuPool(models.Model):
    """GPUs of one model and partitioning behind one scheduler partition/flavor.

    Total, allocatable, reserved (by the broker, not yet running) and idle are kept apart.
    Per-node free counts live in ``nodes`` because placement packs whole workers onto nodes.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="pools")
    name = models.CharField(max_length=100)
    gpu_model = models.CharField(max_length=100)
    gpu_memory_gb = models.PositiveIntegerField(default=0)
    partitioning = models.CharField(max_length=20, default="whole")
    owner = models.CharField(max_length=30, help_text="The scheduler that allocates these GPUs")
    gpus_total = models.PositiveIntegerField(default=0)
    gpus_allocatable = models.PositiveIntegerField(default=0)
    gpus_allocated = models.PositiveIntegerField(default=0)
    gpus_reserved = models.PositiveIntegerField(default=0)
    gpus_idle = models.PositiveIntegerField(default=0)
    nodes = models.JSONField(default=list)
    taken_at = models.DateTimeField()
    held_for = models.CharField(
        max_length=40,
        blank=True,
        help_text="Workload uid of a long-waiting big gang this pool drains for (starvation guard)",
    )

    class Meta:
        ordering = ["cluster__name", "name", "gpu_model"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name", "gpu_model", "partitioning"], name="pool_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.cluster.name}/{self.name} {self.gpu_model} ({self.partitioning})"

    def node_inventories(self, promised: Mapping[str, int] | None = None) -> tuple[NodeInventory, ...]:
        """The stored nodes as the report gave them (what an older row lacks, from the pool);
        ``promised``: GPUs sent to each node since, counted as allocated."""
        return tuple(
            NodeInventory.from_json(
                n,
                gpu_model=self.gpu_model,
                gpu_memory_gb=self.gpu_memory_gb,
                partitioning=self.partitioning,
                owner=self.owner,
                promised=promised,
            )
            for n in self.nodes or ()
        )


class BeatLease(models.Model):
    """Which Celery beat may schedule the periodic work: one holder at a time, for as long as
    it keeps renewing (a second beat started by mistake schedules nothing)."""

    name = models.CharField(max_length=50, unique=True)
    holder = models.CharField(max_length=200, help_text="host:pid:token of the beat that holds it")
    expires_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name} held by {self.holder} until {self.expires_at:%H:%M:%S}"
