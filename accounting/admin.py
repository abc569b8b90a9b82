"""Admin: read-mostly views of the ledger and bills (they are written by services only)."""

from __future__ import annotations

from django.contrib import admin

from accounting.models import (
    BillImport,
    BillLine,
    Discrepancy,
    GpuRate,
    ReconciliationRun,
    UsageEntry,
    UsageWatermark,
)


class ReadOnlyAdmin(admin.ModelAdmin):
    """The ledger and bills are evidence: corrected by re-import, never edited by hand."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(UsageEntry)
class UsageEntryAdmin(ReadOnlyAdmin):
    list_display = ("job_id", "source", "cluster", "project", "gpu_class", "gpus", "start", "end", "gpu_seconds")
    list_filter = ("source", "cluster", "gpu_class")
    search_fields = ("job_id", "workload_uid", "account")
    date_hierarchy = "start"


@admin.register(UsageWatermark)
class UsageWatermarkAdmin(ReadOnlyAdmin):
    list_display = ("cluster", "last_end", "last_collected_at")


class BillLineInline(admin.TabularInline):
    model = BillLine
    extra = 0
    can_delete = False
    fields = ("line_no", "usage_start", "description", "usage_amount", "cost", "project", "workload")
    readonly_fields = fields
    show_change_link = False


@admin.register(BillImport)
class BillImportAdmin(ReadOnlyAdmin):
    list_display = (
        "file_name",
        "provider",
        "tenant",
        "cluster",
        "line_count",
        "matched_count",
        "total_cost",
        "uploaded_at",
    )
    list_filter = ("provider", "tenant")
    inlines = [BillLineInline]


@admin.register(GpuRate)
class GpuRateAdmin(ReadOnlyAdmin):
    """Rates are set on the portal's rate page (which audits them); here they are only listed."""

    list_display = ("gpu_class", "cluster", "valid_from", "price_per_gpu_hour", "source")
    list_filter = ("gpu_class", "source")


class DiscrepancyInline(admin.TabularInline):
    model = Discrepancy
    extra = 0
    can_delete = False
    fields = ("kind", "tenant", "job_id", "message")
    readonly_fields = fields


@admin.register(ReconciliationRun)
class ReconciliationRunAdmin(ReadOnlyAdmin):
    list_display = ("cluster", "period", "ran_at", "workloads", "jobs", "bill_lines")
    list_filter = ("cluster", "period")
    inlines = [DiscrepancyInline]
