"""Django admin for the fleet, quotas and the broker's records.

Clusters, pools and prices are edited here by operators; workloads, attempts, audit
records and reservations are shown read-only because only the services may change them.
"""

from django.contrib import admin

from broker.models import (
    AuditRecord,
    Cluster,
    DispatchAttempt,
    Escalation,
    GpuClass,
    GpuPool,
    PolicyVersion,
    Quota,
    ReconcileRun,
    Reservation,
    Workload,
)


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class GpuPoolInline(admin.TabularInline):
    model = GpuPool
    extra = 0
    fields = (
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
    readonly_fields = fields
    can_delete = False


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "kind",
        "location",
        "region",
        "price_per_gpu_hour",
        "health",
        "last_inventory_at",
        "enabled",
        "draining",
    )
    list_filter = ("kind", "location", "health", "enabled")
    search_fields = ("name", "region")
    readonly_fields = (
        "health",
        "last_inventory_at",
        "last_error",
        "stale_since",
        "queue_pending_jobs",
        "queue_pending_gpus",
        "throughput_gpu_hours_per_hour",
    )
    inlines = [GpuPoolInline]


@admin.register(GpuClass)
class GpuClassAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "min_memory_gb")


@admin.register(Quota)
class QuotaAdmin(admin.ModelAdmin):
    list_display = ("tenant", "gpu_class", "limit_gpus", "borrow_limit_gpus", "owner", "updated_at")
    list_filter = ("gpu_class", "tenant")


@admin.register(Workload)
class WorkloadAdmin(ReadOnlyAdmin):
    list_display = ("uid", "name", "project", "state", "reason", "cluster", "destination_job_id", "created_at")
    list_filter = ("state", "cluster", "reason")
    search_fields = ("uid", "name", "destination_job_id")


@admin.register(Reservation)
class ReservationAdmin(ReadOnlyAdmin):
    list_display = ("workload", "tenant", "gpu_class", "gpus", "state", "cluster", "expires_at")
    list_filter = ("state", "gpu_class")


@admin.register(DispatchAttempt)
class DispatchAttemptAdmin(ReadOnlyAdmin):
    list_display = ("workload", "number", "cluster", "state", "destination_job_id", "created_at")
    list_filter = ("state",)


@admin.register(AuditRecord)
class AuditRecordAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "action", "workload", "cluster", "policy_version", "destination_job_id")
    list_filter = ("action",)
    search_fields = ("workload__uid", "destination_job_id", "message")


@admin.register(Escalation)
class EscalationAdmin(ReadOnlyAdmin):
    list_display = ("kind", "state", "cluster", "destination_job_id", "gpus", "created_at")
    list_filter = ("kind", "state")


@admin.register(PolicyVersion)
class PolicyVersionAdmin(ReadOnlyAdmin):
    list_display = ("version", "source", "first_loaded_at", "last_loaded_at")


@admin.register(ReconcileRun)
class ReconcileRunAdmin(ReadOnlyAdmin):
    list_display = ("started_at", "finished_at")
