"""Read-only: versions and their transitions are written by the release services only."""

from django.contrib import admin

from broker.admin import ReadOnlyAdmin
from broker.policyrelease.models import ImpactReplay, PolicyRelease, PolicyTransition


class TransitionInline(admin.TabularInline):
    model = PolicyTransition
    extra = 0
    can_delete = False
    readonly_fields = ("from_state", "to_state", "actor", "message", "at")

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(PolicyRelease)
class PolicyReleaseAdmin(ReadOnlyAdmin):
    list_display = ("number", "version", "state", "author", "owner", "approver", "created_at", "activated_at")
    list_filter = ("state",)
    inlines = [TransitionInline]


@admin.register(ImpactReplay)
class ImpactReplayAdmin(ReadOnlyAdmin):
    list_display = ("release", "state", "progress", "created_at", "finished_at")
