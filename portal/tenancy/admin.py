from django.contrib import admin

from portal.tenancy.models import Membership, Project, Tenant


class ProjectInline(admin.TabularInline):
    model = Project
    extra = 0


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "cloud_budget_month", "created_at")
    search_fields = ("slug", "name")
    inlines = [ProjectInline]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ("slug", "tenant", "slurm_account", "k8s_namespace", "cost_centre", "run_as")
    list_filter = ("tenant",)
    search_fields = ("slug", "name", "slurm_account", "k8s_namespace", "cost_centre")


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ("user", "tenant", "project", "role")
    list_filter = ("role", "tenant")
    search_fields = ("user__username",)
