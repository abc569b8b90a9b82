"""API shapes.  Serializers only shape data; writes go through the services."""

from __future__ import annotations

from typing import TYPE_CHECKING

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from portal.restapi.strict import StrictSerializer

from broker.models import (
    POOL_REPORT_FIELDS,
    AuditRecord,
    Cluster,
    DispatchAttempt,
    Escalation,
    GpuPool,
    Quota,
    Reservation,
    Workload,
)
from broker.outcomes import workload_outcome
from broker.placement.record import PlacementRecord
from broker.web.explain import RULE_WORDS, reason_words
from broker.web.forms import QUOTA_MAX_GPUS
from broker.services.quota.reservations import gpus_in_use

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from broker.models import GpuClass
    from portal.tenancy.models import Project, Tenant

MAX_ID = 2**63 - 1  # a database id beyond this is not missing, it is malformed


class WorkloadSpecIn(StrictSerializer):
    """The one workload spec, as the API accepts it (validated by broker.spec)."""

    project = serializers.IntegerField(help_text="Project id", min_value=1, max_value=MAX_ID)
    name = serializers.CharField()
    command = serializers.CharField()
    image = serializers.CharField(required=False, allow_blank=True)
    gpu_class = serializers.CharField(required=False, allow_blank=True)
    gpu_models = serializers.ListField(child=serializers.CharField(), required=False)
    min_gpu_memory_gb = serializers.IntegerField(required=False)
    mig_profile = serializers.CharField(required=False, allow_blank=True)
    gpus_per_worker = serializers.IntegerField(required=False)
    workers = serializers.IntegerField(required=False)
    cpus_per_worker = serializers.IntegerField(required=False)
    memory_gb_per_worker = serializers.IntegerField(required=False)
    time_limit_minutes = serializers.IntegerField(required=False)
    data_location = serializers.CharField(required=False, allow_blank=True)
    data_size_gb = serializers.FloatField(required=False)
    residency = serializers.ListField(child=serializers.CharField(), required=False)
    same_interconnect = serializers.BooleanField(required=False)
    gpu_share = serializers.BooleanField(
        required=False,
        help_text="gpus_per_worker then counts shares of a shared GPU (time-slicing, MPS, Slurm shard), charged so",
    )
    topology_level = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="A topology level every worker shares: host, rack, block, or a cluster's own level name",
    )
    topology_mode = serializers.CharField(
        required=False, allow_blank=True, help_text="required (the default) or preferred"
    )
    priority = serializers.CharField(required=False)
    priority_class = serializers.CharField(
        required=False, allow_blank=True, help_text="A fleet priority class of the policy; sets the priority"
    )
    checkpointable = serializers.BooleanField(required=False)
    off_peak = serializers.BooleanField(
        required=False, help_text="Start only in the off-peak hours of the site it runs at"
    )
    gpu_check = serializers.BooleanField(
        required=False, help_text="Check on every worker that it sees its GPUs before the command runs"
    )
    gpu_check_command = serializers.CharField(
        required=False, allow_blank=True, help_text="A shell command to run as that check instead"
    )


class OutcomeOut(serializers.Serializer):
    summary = serializers.CharField(help_text='Plain words: "exited with code 3", "ran out of memory on worker 3"')
    end_reason = serializers.CharField(help_text="The scheduler's own word: TIMEOUT, OOMKilled, COMPLETED")
    exit_code = serializers.IntegerField(allow_null=True)
    signal = serializers.IntegerField(allow_null=True)
    worker = serializers.CharField(help_text="The worker whose end ended the job, when one did")
    detail = serializers.CharField()
    run_seconds = serializers.FloatField(allow_null=True)
    gpu_hours = serializers.FloatField(allow_null=True)


class WorkloadOut(serializers.ModelSerializer):
    project: serializers.SlugRelatedField[Project] = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    cluster: serializers.SlugRelatedField[Cluster] = serializers.SlugRelatedField(slug_field="name", read_only=True)
    gpu_class: serializers.SlugRelatedField[GpuClass] = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    local_reason = serializers.CharField(source="reason", read_only=True, help_text="The normalised local queue reason")
    local_reason_text = serializers.SerializerMethodField()
    outcome = serializers.SerializerMethodField()

    class Meta:
        model = Workload
        fields = [
            "id",
            "uid",
            "name",
            "project",
            "state",
            "reason",
            "local_reason",
            "local_reason_text",
            "raw_reason",
            "cluster",
            "destination_job_id",
            "worker_cluster",
            "gpu_class",
            "total_gpus",
            "spec",
            "placement",
            "policy_version",
            "created_at",
            "dispatched_at",
            "started_at",
            "ended_at",
            "cancel_requested_at",
            "outcome",
            "preemptions",
        ]
        read_only_fields = fields

    def get_local_reason_text(self, workload: Workload) -> str:
        return reason_words(workload.state, workload.reason)[0] if workload.reason else ""

    @extend_schema_field(OutcomeOut(allow_null=True, help_text="How it ended; null until it has"))
    def get_outcome(self, workload: Workload) -> dict | None:
        return workload_outcome(workload)


class AuditOut(serializers.ModelSerializer):
    class Meta:
        model = AuditRecord
        fields = [
            "created_at",
            "action",
            "message",
            "cluster",
            "policy_version",
            "score_breakdown",
            "destination_job_id",
        ]


class QuotaOut(serializers.ModelSerializer):
    tenant: serializers.SlugRelatedField[Tenant] = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    gpu_class: serializers.SlugRelatedField[GpuClass] = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    owner: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    used_gpus = serializers.SerializerMethodField()

    class Meta:
        model = Quota
        fields = ["id", "tenant", "gpu_class", "limit_gpus", "borrow_limit_gpus", "owner", "used_gpus"]

    def get_used_gpus(self, quota: Quota) -> int:

        return gpus_in_use(tenant_id=quota.tenant_id, gpu_class_id=quota.gpu_class_id)


class QuotaIn(StrictSerializer):
    """A partial update: either number, or both; at least one."""

    limit_gpus = serializers.IntegerField(min_value=0, max_value=QUOTA_MAX_GPUS, required=False)
    borrow_limit_gpus = serializers.IntegerField(min_value=0, max_value=QUOTA_MAX_GPUS, required=False)

    def validate(self, attrs: dict) -> dict:
        if not attrs:
            message = "give limit_gpus, borrow_limit_gpus or both."
            raise serializers.ValidationError({"limit_gpus": [message], "borrow_limit_gpus": [message]})
        return attrs


class PoolOut(serializers.ModelSerializer):
    class Meta:
        model = GpuPool
        fields = list(POOL_REPORT_FIELDS)


class ClusterOut(serializers.ModelSerializer):
    pools = PoolOut(many=True, read_only=True)

    class Meta:
        model = Cluster
        fields = [
            "id",
            "name",
            "kind",
            "region",
            "location",
            "price_per_gpu_hour",
            "health",
            "last_inventory_at",
            "draining",
            "pools",
        ]


class ReservationOut(serializers.ModelSerializer):
    workload = serializers.CharField(source="workload.uid", help_text="The workload's uid")
    workload_id = serializers.IntegerField()
    tenant = serializers.CharField(source="tenant.slug")
    gpu_class = serializers.CharField(source="gpu_class.slug")
    cluster: serializers.SlugRelatedField[Cluster] = serializers.SlugRelatedField(slug_field="name", read_only=True)
    quota_owner = serializers.CharField(allow_null=True, help_text="Who answers for the quota it counts against")

    class Meta:
        model = Reservation
        fields = [
            "id",
            "workload",
            "workload_id",
            "tenant",
            "gpu_class",
            "quota_owner",
            "gpus",
            "cluster",
            "state",
            "created_at",
            "expires_at",
            "confirmed_at",
        ]


class EscalationOut(serializers.ModelSerializer):
    cluster: serializers.SlugRelatedField[Cluster] = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = Escalation
        fields = [
            "id",
            "kind",
            "state",
            "cluster",
            "destination_job_id",
            "gpus",
            "evidence",
            "outcome",
            "created_at",
            "resolved_at",
        ]


class EscalationResolveIn(StrictSerializer):
    outcome = serializers.CharField()
    old_run_dead = serializers.BooleanField(required=False, default=False)


class AttemptOut(serializers.ModelSerializer):
    cluster: serializers.SlugRelatedField[Cluster] = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = DispatchAttempt
        fields = ["id", "number", "cluster", "state", "destination_job_id", "error", "created_at", "finished_at"]


class ExplainCandidateOut(serializers.Serializer):
    cluster = serializers.CharField()
    pool = serializers.CharField()
    score = serializers.FloatField(help_text="Lower is better: the sum of the weighted terms")
    terms = serializers.DictField(
        child=serializers.FloatField(), source="breakdown", help_text="Each term's estimate in its own unit"
    )
    weighted = serializers.DictField(child=serializers.FloatField(), help_text="Each term normalised x its weight")


class ExplainExclusionOut(serializers.Serializer):
    cluster = serializers.CharField()
    rule = serializers.CharField()
    rule_text = serializers.CharField()
    detail = serializers.CharField()


class ExplainChosenOut(serializers.Serializer):
    cluster = serializers.CharField()
    pool = serializers.CharField()


class ExplainOut(serializers.Serializer):
    """The placement decision of a workload, as recorded when it was made."""

    id = serializers.IntegerField()
    state = serializers.CharField()
    policy_version = serializers.CharField()
    reason = serializers.CharField(help_text="Why nothing was chosen (empty once placed)")
    chosen = ExplainChosenOut(allow_null=True)
    candidates = ExplainCandidateOut(many=True)
    excluded = ExplainExclusionOut(many=True)

    @staticmethod
    def shape(workload: Workload) -> dict:
        placement = PlacementRecord.from_json(workload.placement)
        chosen = placement.chosen
        return {
            "id": workload.id,
            "state": workload.state,
            "policy_version": placement.policy_version or workload.policy_version,
            "reason": placement.reason,
            "chosen": {"cluster": chosen.cluster, "pool": chosen.pool} if chosen else None,
            "candidates": [c.to_json() for c in placement.ranked],
            "excluded": [
                {"cluster": name, "rule": e.rule, "rule_text": RULE_WORDS.get(e.rule, ""), "detail": e.message}
                for name, e in placement.excluded.items()
            ],
        }


# --- the caller, their projects and tokens -------------------------------------------------


class MeOut(serializers.Serializer):
    username = serializers.CharField()
    roles = serializers.ListField(child=serializers.CharField())
    tenants = serializers.ListField(child=serializers.CharField(), help_text="Tenant slugs")
    is_operator = serializers.BooleanField()


class ProjectOut(serializers.Serializer):
    id = serializers.IntegerField()
    slug = serializers.CharField()
    name = serializers.CharField()
    tenant = serializers.CharField(source="tenant.slug")
    slurm_account = serializers.CharField()
    namespace = serializers.CharField(source="k8s_namespace")
    queue = serializers.CharField(source="k8s_queue")
    cost_centre = serializers.CharField()
