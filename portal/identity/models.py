"""Institutional sign-in (OpenID Connect): who a provider's subject is here, and the rules
that turn its claims (groups) into tenant roles.

A role granted by a rule is recorded as such (GrantedRole), so the next sign-in can take
it away when the group is gone, without touching roles an admin gave by hand.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from portal.tenancy.models import Membership, Project, Role, Tenant


class ClaimRule(models.Model):
    claim = models.CharField(
        max_length=100, default="groups", help_text="Claim to look at (a list or a string), e.g. groups"
    )
    value = models.CharField(max_length=300, help_text="Exact value that grants the role, e.g. physics-gpu")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="claim_rules")
    project = models.ForeignKey(
        Project, null=True, blank=True, on_delete=models.CASCADE, help_text="Empty: every project of the tenant"
    )
    role = models.CharField(max_length=20, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["claim", "value"]
        constraints = [
            models.UniqueConstraint(fields=["claim", "value", "tenant", "project", "role"], name="claim_rule_unique")
        ]

    def __str__(self) -> str:
        return f"{self.claim}={self.value} -> {self.role} in {self.tenant.slug}"


class ExternalIdentity(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="external_identities")
    issuer = models.CharField(max_length=300)
    subject = models.CharField(max_length=255)
    last_claims = models.JSONField(default=dict, blank=True)
    first_seen_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="external_identity_unique")]


class GrantedRole(models.Model):
    membership = models.OneToOneField(Membership, on_delete=models.CASCADE, related_name="granted_by")
    rule = models.ForeignKey(ClaimRule, null=True, on_delete=models.SET_NULL)
    granted_at = models.DateTimeField(auto_now_add=True)


class IdentitySource(models.TextChoices):
    ADMIN = "admin", "Set by an admin"
    CLAIM = "claim", "From the sign-in claim"


class ClusterIdentity(models.Model):
    """Who a person is on the clusters, where a site runs jobs as the person: their POSIX
    user (Slurm submits with it) and, optionally, the Kubernetes user the broker
    impersonates.  One per person; a POSIX name belongs to one person only."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="cluster_identity")
    posix_user = models.CharField(max_length=32, help_text="POSIX user name at the Slurm clusters")
    posix_group = models.CharField(
        max_length=32, blank=True, help_text="POSIX group for sbatch --gid; empty: the user's primary group"
    )
    k8s_user = models.CharField(
        max_length=253, blank=True, help_text="Kubernetes user to impersonate; empty: no impersonation"
    )
    source = models.CharField(max_length=10, choices=IdentitySource.choices, default=IdentitySource.ADMIN)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["posix_user"]
        verbose_name_plural = "cluster identities"
        constraints = [models.UniqueConstraint(fields=["posix_user"], name="cluster_identity_posix_unique")]

    def __str__(self) -> str:
        return f"{self.user} as {self.posix_user}"
