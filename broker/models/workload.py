"""Workloads, the attempts to dispatch them, the audit trail and escalations."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from broker.models.fields import created_at_field, TouchedAtField

from broker.lifecycle import (  # noqa: F401  (re-exported: the models' state names)
    AT_DESTINATION_STATES,
    CANCELLABLE_STATES,
    TERMINAL_STATES,
    AttemptState,
    EscalationState,
    WorkloadState,
)
from broker.models.fleet import Cluster, GpuClass
from portal.tenancy.models import Project, Tenant


def new_workload_uid() -> str:
    return "wl-" + uuid.uuid4().hex[:16]


class LocalReason(models.TextChoices):
    """Why a job waits, normalised across control planes (the values of the backends' Reason)."""

    NONE = "none", "None"
    POLICY = "policy", "Policy or quota"
    CAPACITY = "capacity", "Not enough free GPUs"
    GANG = "gang", "Waiting for the whole gang"
    HELD = "held", "Held"
    UNAVAILABLE = "unavailable", "Destination unavailable"
    WAITING = "waiting", "Dependency or begin time"
    OTHER = "other", "Other"


class WorkloadOrigin(models.TextChoices):
    """Who submitted it: the broker itself, or a control plane the broker only places for."""

    BROKER = "broker", "Broker"
    MULTIKUEUE = "multikueue", "MultiKueue"


class Workload(models.Model):
    uid = models.CharField(max_length=40, unique=True, default=new_workload_uid, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="workloads")
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="workloads")
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="workloads"
    )
    name = models.CharField(max_length=63)
    spec = models.JSONField()
    gpu_class = models.ForeignKey(GpuClass, null=True, on_delete=models.PROTECT, related_name="workloads")
    total_gpus = models.PositiveIntegerField()
    state = models.CharField(max_length=20, choices=WorkloadState.choices, default=WorkloadState.SUBMITTED)
    reason = models.CharField(
        max_length=20, blank=True, choices=LocalReason.choices, help_text="Normalised local queue reason"
    )
    raw_reason = models.TextField(blank=True, help_text="The scheduler's own words")
    cluster = models.ForeignKey(Cluster, null=True, blank=True, on_delete=models.PROTECT, related_name="workloads")
    destination_job_id = models.CharField(max_length=200, blank=True)
    worker_cluster = models.CharField(max_length=100, blank=True)
    placement = models.JSONField(default=dict, blank=True, help_text="Last ranked and excluded clusters")
    tried_clusters = models.JSONField(default=list, blank=True)
    policy_version = models.CharField(max_length=64, blank=True)
    resubmit_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="resubmissions"
    )
    created_at = created_at_field()
    updated_at = TouchedAtField()
    dispatched_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    run_seconds = models.FloatField(
        null=True, blank=True, help_text="Run time the cluster reports; empty: ended_at - started_at is all we know"
    )
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    # MultiKueue dispatcher mode: uid is the Kueue Workload's UID, external_ref its
    # namespace/name on the manager, nominated_at when the nomination in force was written.
    origin = models.CharField(max_length=20, choices=WorkloadOrigin.choices, default=WorkloadOrigin.BROKER)
    external_ref = models.CharField(
        max_length=300, blank=True, help_text="namespace/name of the object another control plane owns"
    )
    nominated_at = models.DateTimeField(null=True, blank=True)
    # a database default too, so that a release before this column keeps inserting rows
    # while the new one is rolled out (docs/upgrading.md, expand then contract)
    preemptions = models.PositiveIntegerField(
        default=0,
        db_default=0,
        help_text="Times its destination stopped it while running (preempted or evicted there) "
        "and it was queued or placed again",
    )
    outcome = models.JSONField(
        default=dict,
        blank=True,
        help_text="How the job ended, as its scheduler said: summary, end_reason, exit_code, signal, worker",
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["project", "-created_at"]),
            models.Index(fields=["state"]),
            models.Index(fields=["cluster", "state"]),
        ]
        constraints = [
            # invariant 3 at the schema level: one destination job id per cluster
            models.UniqueConstraint(
                fields=["cluster", "destination_job_id"],
                condition=~models.Q(destination_job_id=""),
                name="one_workload_per_destination_job",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.uid} {self.name}"

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def can_cancel(self) -> bool:
        return self.state in CANCELLABLE_STATES

    @property
    def placed_cluster(self) -> Cluster:
        """The cluster placement chose (set from ``reserved`` on); asking earlier is a bug."""
        if self.cluster is None:
            raise ValueError(f"workload {self.uid} has no cluster yet")
        return self.cluster


class DispatchAttempt(models.Model):
    """Written *before* the cluster is called, so a crash leaves a trace to look up."""

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="attempts")
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="attempts")
    number = models.PositiveIntegerField()
    state = models.CharField(max_length=20, choices=AttemptState.choices, default=AttemptState.STARTED)
    destination_job_id = models.CharField(max_length=200, blank=True)
    error = models.TextField(blank=True)
    created_at = created_at_field()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["workload_id", "number"]
        constraints = [models.UniqueConstraint(fields=["workload", "number"], name="attempt_number_unique")]


class AuditRecord(models.Model):
    """Every decision and every change of a workload's fate leaves one of these."""

    workload = models.ForeignKey(Workload, null=True, blank=True, on_delete=models.CASCADE, related_name="audit")
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.CASCADE, related_name="audit")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    action = models.CharField(max_length=50)
    message = models.TextField(blank=True)
    policy_version = models.CharField(max_length=64, blank=True)
    inputs = models.JSONField(default=dict, blank=True)
    cluster = models.CharField(max_length=63, blank=True)
    score_breakdown = models.JSONField(default=dict, blank=True)
    destination_job_id = models.CharField(max_length=200, blank=True)
    created_at = created_at_field()

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["workload", "created_at"])]


class EscalationKind(models.TextChoices):
    ORPHAN_JOB = "orphan_job", "Destination job with no broker record"
    DOUBLE_CLAIM = "double_claim", "GPU node claimed by two schedulers"
    LOST_JOB = "lost_job", "Running job its cluster no longer reports"
    GPU_CHECK = "gpu_check", "A node's GPUs failed a job's pre-flight check: blocked"
    UNCLEAR = "unclear", "Other unclear allocation"


class Escalation(models.Model):
    """An allocation nobody can explain.  Never released automatically: an admin decides."""

    kind = models.CharField(max_length=20, choices=EscalationKind.choices)
    key = models.CharField(max_length=300, help_text="What makes this the same problem on the next pass")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="escalations")
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.SET_NULL, related_name="escalations")
    workload = models.ForeignKey(Workload, null=True, blank=True, on_delete=models.SET_NULL, related_name="escalations")
    destination_job_id = models.CharField(max_length=200, blank=True)
    gpus = models.PositiveIntegerField(default=0)
    evidence = models.JSONField(default=dict)
    state = models.CharField(max_length=20, choices=EscalationState.choices, default=EscalationState.OPEN)
    outcome = models.TextField(blank=True)
    created_at = created_at_field()
    last_seen_at = created_at_field()
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["state", "-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["key"], condition=~models.Q(state="resolved"), name="one_unresolved_escalation_per_key"
            ),
        ]


class PolicyVersion(models.Model):
    """Each policy file content the broker has run under; the newest active one is in force."""

    version = models.CharField(max_length=64, unique=True)
    content = models.TextField()
    source = models.CharField(max_length=300)
    first_loaded_at = created_at_field()
    last_loaded_at = TouchedAtField()

    class Meta:
        ordering = ["-last_loaded_at"]


class ReconcileRun(models.Model):
    """One reconciliation pass: its lag and what it found (for the fleet overview)."""

    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    report = models.JSONField(default=dict)

    class Meta:
        ordering = ["-started_at"]
