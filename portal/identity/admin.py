from django.contrib import admin

from portal.identity.models import ClaimRule, ExternalIdentity


@admin.register(ClaimRule)
class ClaimRuleAdmin(admin.ModelAdmin):
    list_display = ("claim", "value", "tenant", "project", "role")
    list_filter = ("role", "tenant")


@admin.register(ExternalIdentity)
class ExternalIdentityAdmin(admin.ModelAdmin):
    list_display = ("user", "issuer", "subject", "last_seen_at")
    readonly_fields = ("user", "issuer", "subject", "last_claims", "first_seen_at", "last_seen_at")

    def has_add_permission(self, request) -> bool:
        return False
