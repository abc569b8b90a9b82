"""Tenants, their projects, and who may do what in them."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models

slug_validator = RegexValidator(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "lower-case letters, digits and '-'")


class Role(models.TextChoices):
    RESEARCHER = "researcher", "Researcher"
    ADMIN = "admin", "Admin"
    FINANCE = "finance", "Finance"


class Tenant(models.Model):
    slug = models.SlugField(max_length=40, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=200)
    cloud_budget_month = models.DecimalField(
        max_digits=14,
        decimal_places=2,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal("0"))],
        help_text="Cloud spend allowed per month, in the bills' currency; empty: no budget set",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.name


class RunAs(models.TextChoices):
    """Whose name a project's jobs carry at the cluster."""

    ACCOUNT = "account", "The project account (the broker's own cluster user)"
    PERSON = "person", "The person who submitted them (their cluster identity)"


class Project(models.Model):
    """One identity used everywhere: the Slurm account, the Kubernetes namespace and
    the cost centre a project's GPU-hours are charged to all hang off this row."""

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="projects")
    slug = models.SlugField(max_length=40, validators=[slug_validator])
    name = models.CharField(max_length=200)
    slurm_account = models.CharField(max_length=64, blank=True)
    k8s_namespace = models.CharField(max_length=63, blank=True, validators=[slug_validator])
    k8s_queue = models.CharField(
        max_length=63, blank=True, help_text="Kueue LocalQueue / Volcano Queue; empty: 'default'"
    )
    cost_centre = models.CharField(max_length=64, blank=True)
    run_as = models.CharField(
        max_length=10,
        choices=RunAs.choices,
        default=RunAs.ACCOUNT,
        help_text="person: Slurm jobs run as the submitter's POSIX user, Kubernetes requests "
        "impersonate their user; account: as the broker's own cluster user",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["tenant__slug", "slug"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "slug"], name="project_slug_unique_in_tenant"),
            models.UniqueConstraint(
                fields=["slurm_account"],
                condition=~models.Q(slurm_account=""),
                name="project_slurm_account_unique",
            ),
            models.UniqueConstraint(
                fields=["k8s_namespace"],
                condition=~models.Q(k8s_namespace=""),
                name="project_k8s_namespace_unique",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tenant.slug}/{self.slug}"


class Membership(models.Model):
    """A user's role in a tenant; a researcher may be limited to one project."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    project = models.ForeignKey(
        Project,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="memberships",
        help_text="Empty: every project of the tenant.",
    )
    role = models.CharField(max_length=20, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["tenant__slug", "role"]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "tenant", "project", "role"],
                condition=models.Q(project__isnull=False),
                name="membership_unique_in_project",
            ),
            models.UniqueConstraint(
                fields=["user", "tenant", "role"],
                condition=models.Q(project__isnull=True),
                name="membership_unique_in_tenant",
            ),
        ]

    def __str__(self) -> str:
        project = self.project if self.project_id else None
        scope = project.slug if project is not None else "*"
        return f"{self.user} {self.role} in {self.tenant.slug}/{scope}"
