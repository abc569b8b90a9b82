"""Django admin for the fleet, quotas and the broker's records.

Clusters, pools and prices are edited here by operators; workloads, attempts, audit
records and reservations are shown read-only because only the services may change them.
Quotas are edited here too, but saved through the services, as the quota page saves them.
"""

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponse

from broker.elastic_pools import ElasticConfigError, elastic_pools
from broker.models import (
    AuditRecord,
    Cluster,
    DispatchAttempt,
    Escalation,
    GpuClass,
    GpuPool,
    POOL_REPORT_FIELDS,
    PolicyVersion,
    Quota,
    ReconcileRun,
    Reservation,
    Workload,
)
from broker.services.quota.reservations import quota_set
from broker.services.quota.owners import quota_set_owner
from portal.tenancy.refusals import form_refused
from portal.tenancy.access import signed_in
from portal.tenancy.errors import DomainError


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
    fields = POOL_REPORT_FIELDS
    readonly_fields = fields
    can_delete = False


class ClusterAdminForm(forms.ModelForm):
    class Meta:
        model = Cluster
        fields = (
            "name", "kind", "region", "location", "price_per_gpu_hour", "egress_per_gb", "config",
            "credentials_ref", "enabled", "draining", "capacity_changed_at", "local_limits",
        )  # fmt: skip

    def clean_config(self) -> Any:
        """An elastic pool (``config.elastic_pools``) is checked here, naming the bad field:
        placement reads it for every decision."""
        config = self.cleaned_data.get("config")
        try:
            elastic_pools(config if isinstance(config, dict) else {})
        except ElasticConfigError as exc:
            raise forms.ValidationError(f"config.{exc}") from None
        return config


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    form = ClusterAdminForm
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


_REFUSAL = "_gpubroker_quota_refusal"  # the request attribute carrying the service's refusal


class QuotaAdminForm(forms.ModelForm):
    refusal: DomainError | None = None  # set (per request) when the service refused the first try

    class Meta:
        model = Quota
        fields = ("tenant", "gpu_class", "limit_gpus", "borrow_limit_gpus", "owner", "alert_share")

    def clean(self) -> dict[str, Any] | None:
        cleaned = super().clean()
        if self.refusal is not None:
            form_refused(self, self.refusal)
        return cleaned


@admin.register(Quota)
class QuotaAdmin(admin.ModelAdmin):
    """Saves go through ``quota_set`` (the row locked, the change audited, a limit below what is
    reserved or running refused) and ``quota_set_owner``.  The services decide: a refusal rolls
    the whole save back and the same form comes back with the service's words on the field."""

    form = QuotaAdminForm
    list_display = ("tenant", "gpu_class", "limit_gpus", "borrow_limit_gpus", "owner", "updated_at")
    list_filter = ("gpu_class", "tenant")

    def get_readonly_fields(self, request: HttpRequest, obj: Quota | None = None) -> tuple[str, ...]:
        # a quota is one tenant's of one class: moving it would move its reservations' ceiling
        return ("tenant", "gpu_class", "alert_active") if obj else ("alert_active",)

    def has_delete_permission(self, request: HttpRequest, obj: Quota | None = None) -> bool:
        return False  # deleting would drop the ceiling under live reservations: set the limit instead

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change, **kwargs)
        refusal = getattr(request, _REFUSAL, None)
        return type(form.__name__, (form,), {"refusal": refusal}) if refusal is not None else form

    def changeform_view(
        self, request: HttpRequest, object_id: str | None = None, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except DomainError as exc:
            # the save's transaction is rolled back: validate the same input again, refused
            setattr(request, _REFUSAL, exc)
            return super().changeform_view(request, object_id, form_url, extra_context)

    def save_model(self, request: HttpRequest, obj: Quota, form: Any, change: bool) -> None:
        saved = quota_set(
            actor=signed_in(request.user),
            tenant_id=obj.tenant_id,
            gpu_class_id=obj.gpu_class_id,
            limit_gpus=obj.limit_gpus,
            borrow_limit_gpus=obj.borrow_limit_gpus,
        )
        if (obj.owner_id, obj.alert_share) != (saved.owner_id, saved.alert_share):
            saved = quota_set_owner(
                actor=signed_in(request.user), quota_id=saved.id, owner_id=obj.owner_id, alert_share=obj.alert_share
            )
        obj.pk, obj.updated_at = saved.pk, saved.updated_at  # the admin's log and redirect read them
        obj._state.adding = False


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
