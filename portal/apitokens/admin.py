from django.contrib import admin, messages

from portal.apitokens.models import ApiToken
from portal.apitokens.services.tokens import token_revoke


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Operators see every token (never a secret: none is stored) and may revoke them."""

    list_display = ("user", "name", "prefix", "created_at", "expires_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("user__username", "name", "prefix")
    readonly_fields = [f.name for f in ApiToken._meta.fields]
    actions = ["revoke"]

    def has_add_permission(self, request) -> bool:
        return False  # a token is created by its user, who alone sees the secret

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset) -> None:
        for token in queryset:
            token_revoke(actor=request.user, token_id=token.id)
        messages.success(request, f"{queryset.count()} token(s) revoked.")
