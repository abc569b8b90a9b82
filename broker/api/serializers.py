"""API shapes.  Serializers only shape data; writes go through the services."""
from __future__ import annotations

from rest_framework import serializers

from broker.models import AuditRecord, Cluster, Escalation, GpuPool, Quota, Workload


class WorkloadSpecIn(serializers.Serializer):
    """The one workload spec, as the API accepts it (validated by broker.spec)."""

    project = serializers.IntegerField(help_text="Project id")
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


class WorkloadOut(serializers.ModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    gpu_class = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = Workload
        fields = ["id", "uid", "name", "project", "state", "reason", "raw_reason", "cluster",
                  "destination_job_id", "worker_cluster", "gpu_class", "total_gpus", "spec", "placement",
                  "policy_version", "created_at", "dispatched_at", "started_at", "ended_at",
                  "cancel_requested_at"]
        read_only_fields = fields


class AuditOut(serializers.ModelSerializer):
    class Meta:
        model = AuditRecord
        fields = ["created_at", "action", "message", "cluster", "policy_version", "score_breakdown",
                  "destination_job_id"]


class QuotaOut(serializers.ModelSerializer):
    tenant = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    gpu_class = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    owner = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    used_gpus = serializers.SerializerMethodField()

    class Meta:
        model = Quota
        fields = ["id", "tenant", "gpu_class", "limit_gpus", "borrow_limit_gpus", "owner", "used_gpus"]

    def get_used_gpus(self, quota: Quota) -> int:
        from broker.services.quota import gpus_in_use

        return gpus_in_use(tenant_id=quota.tenant_id, gpu_class_id=quota.gpu_class_id)


class QuotaIn(serializers.Serializer):
    limit_gpus = serializers.IntegerField(min_value=0)
    borrow_limit_gpus = serializers.IntegerField(min_value=0, required=False)


class PoolOut(serializers.ModelSerializer):
    class Meta:
        model = GpuPool
        fields = ["name", "gpu_model", "gpu_memory_gb", "partitioning", "owner", "gpus_total",
                  "gpus_allocatable", "gpus_allocated", "gpus_reserved", "gpus_idle", "taken_at"]


class ClusterOut(serializers.ModelSerializer):
    pools = PoolOut(many=True, read_only=True)

    class Meta:
        model = Cluster
        fields = ["id", "name", "kind", "region", "location", "price_per_gpu_hour", "health",
                  "last_inventory_at", "draining", "pools"]


class EscalationOut(serializers.ModelSerializer):
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = Escalation
        fields = ["id", "kind", "state", "cluster", "destination_job_id", "gpus", "evidence", "outcome",
                  "created_at", "resolved_at"]


class EscalationResolveIn(serializers.Serializer):
    outcome = serializers.CharField()
    old_run_dead = serializers.BooleanField(required=False, default=False)
