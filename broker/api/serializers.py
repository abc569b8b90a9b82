"""API shapes.  Serializers only shape data; writes go through the services."""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

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
from broker import runtime
from broker.services.quota.reservations import gpus_in_use

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from broker.models import GpuClass
    from portal.tenancy.models import Project, Tenant

MAX_ID = 2**63 - 1  # a database id beyond this is not missing, it is malformed


# The JSON type each kind of field takes as it is, not coerced: "8" is not 8, 0 is not "0".
_JSON_TYPES: tuple[tuple[type, tuple[type, ...], str], ...] = (
    (serializers.BooleanField, (bool,), "true or false"),
    (serializers.IntegerField, (int,), "a whole number"),
    (serializers.FloatField, (int, float), "a number"),
    (serializers.ListField, (list,), "a list"),
    (serializers.CharField, (str,), "text"),
    (serializers.ChoiceField, (str,), "text"),
)


class StrictSerializer(serializers.Serializer):
    """Input serializer (for JSON bodies) that refuses fields it does not know, naming each
    (and the field meant, where one is close): a misspelled ``gpu_per_worker`` must not become
    a default; and a value of the wrong JSON type is an error, not a coercion."""

    def to_internal_value(self, data):
        problems = self._problems(data) if isinstance(data, dict) else {}
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if problems and isinstance(exc.detail, dict):
                exc.detail.update(problems)
            raise
        if problems:
            raise serializers.ValidationError(problems)
        return value

    def _problems(self, data: dict) -> dict[str, list[str]]:
        out = {}
        for name, raw in data.items():
            field = self.fields.get(name)
            if field is None:
                close = difflib.get_close_matches(str(name), list(self.fields), n=1)
                out[str(name)] = ["Unknown field." + (f" Did you mean {close[0]!r}?" if close else "")]
            elif raw is not None and (words := _wrong_type(field, raw)):
                out[name] = [f"must be {words}."]
        return out


def _wrong_type(field: serializers.Field, raw) -> str:
    for kind, types, words in _JSON_TYPES:
        if isinstance(field, kind):
            ok = isinstance(raw, types) and not (isinstance(raw, bool) and bool not in types)
            if ok and isinstance(field, serializers.ListField) and isinstance(field.child, serializers.CharField):
                ok = all(isinstance(item, str) for item in raw)
                words = "a list of text"
            return "" if ok else words
    return ""


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
    priority = serializers.CharField(required=False)
    checkpointable = serializers.BooleanField(required=False)


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


class TokenOut(serializers.Serializer):
    id = serializers.IntegerField()
    user = serializers.CharField(source="user.username")
    name = serializers.CharField()
    prefix = serializers.CharField(help_text="The secret's first characters")
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)
    state = serializers.SerializerMethodField()

    def get_state(self, token) -> str:
        return token.state(runtime.now())


class TokenIn(StrictSerializer):
    name = serializers.CharField(max_length=100)
    expires_in_days = serializers.IntegerField(min_value=1, max_value=365, default=90)


class TokenCreatedOut(serializers.Serializer):
    id = serializers.IntegerField(source="token.id")
    name = serializers.CharField(source="token.name")
    token = serializers.CharField(source="secret", help_text="The secret: shown this once, never again")
    prefix = serializers.CharField(source="token.prefix")
    expires_at = serializers.DateTimeField(source="token.expires_at")


# --- accounting ------------------------------------------------------------------------------


class MonthIn(serializers.Serializer):
    """Query parameters (other parameters, such as a cache buster, are ignored)."""

    month = serializers.RegexField(
        r"^2\d{3}-(0[1-9]|1[0-2])$",
        required=False,
        error_messages={"invalid": "must be a month as YYYY-MM (2000-2999)."},
    )


class ChargebackIn(MonthIn):
    months = serializers.IntegerField(min_value=1, max_value=24, default=1)
    tenant = serializers.SlugField(required=False, help_text="Only this tenant (slug)")
    project = serializers.SlugField(required=False, help_text="Only this project of the tenant (slug)")
    format = serializers.ChoiceField(choices=["json", "csv", "xlsx"], default="json")


class UsageOut(serializers.Serializer):
    tenant = serializers.CharField(source="project.tenant.slug")
    project = serializers.CharField(source="project.slug")
    project_id = serializers.IntegerField(source="project.id")
    gpu_class = serializers.CharField()
    ended_gpu_hours = serializers.DecimalField(
        max_digits=20, decimal_places=2, source="ended_hours", coerce_to_string=False
    )
    running_gpu_hours = serializers.DecimalField(
        max_digits=20, decimal_places=2, source="running_hours", coerce_to_string=False
    )
    jobs = serializers.IntegerField()


@extend_schema_field({"type": "string", "pattern": r"^\d{4}-\d{2}$", "example": "2026-11"})
class MonthField(serializers.Field):
    """A month as YYYY-MM (read only)."""

    def to_representation(self, value) -> str:
        return f"{value:%Y-%m}"


def _money(**kw) -> serializers.DecimalField:
    return serializers.DecimalField(max_digits=20, decimal_places=2, coerce_to_string=False, **kw)


# the figures of a chargeback row, and of the totals: the CSV's columns, which add up
class ChargebackTotalsOut(serializers.Serializer):
    onprem_gpu_hours = _money(source="onprem_hours")
    onprem_cost = _money()
    cloud_gpu_hours = _money(source="cloud_hours")
    cloud_cost = _money(help_text="Billed: the matched bill lines (egress apart)")
    cloud_estimated_gpu_hours = _money(
        source="cloud_estimated_hours", help_text="Cloud GPU-hours no bill line covers yet (part of cloud_gpu_hours)"
    )
    cloud_estimated_cost = _money(help_text="Those hours priced at the cluster's list price, until their bill comes")
    egress_cost = _money(help_text="The bills' data-transfer-out lines")
    gpu_hours = _money()
    cost = _money(help_text="onprem_cost + cloud_cost + cloud_estimated_cost + egress_cost")
    status = serializers.SerializerMethodField(help_text="final, or estimated when part of the cost is an estimate")

    def get_status(self, obj) -> str:
        return "estimated" if obj.estimated else "final"


class _ChargebackKey(serializers.Serializer):
    month = MonthField()
    tenant = serializers.CharField()
    project = serializers.CharField()
    user = serializers.CharField(
        help_text="Who is charged: the submitter, else the person whose cluster "
        "identity the job ran as, else the cluster user, else (unassigned)"
    )
    gpu_class = serializers.CharField()


# a row: its key (month, tenant, project, user, GPU class), then its figures
class ChargebackRowOut(_ChargebackKey, ChargebackTotalsOut):
    pass


class ChargebackOut(serializers.Serializer):
    months = serializers.ListField(child=MonthField())
    rows = ChargebackRowOut(many=True)
    totals = ChargebackTotalsOut()
