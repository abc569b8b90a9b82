from django import forms
from django.contrib import admin

from portal.identity.models import ClaimRule, ClusterIdentity, ExternalIdentity
from portal.identity.names import k8s_user_problem, posix_name_problem
from portal.identity.services.cluster_identity import cluster_identity_clear, cluster_identity_set


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


class ClusterIdentityForm(forms.ModelForm):
    class Meta:
        model = ClusterIdentity
        fields = ("user", "posix_user", "posix_group", "k8s_user")

    def _checked(self, name: str, problem) -> str:
        value = self.cleaned_data.get(name, "").strip()
        if value and (why := problem(value)):
            raise forms.ValidationError(why)
        return value

    def clean_posix_user(self) -> str:
        return self._checked("posix_user", posix_name_problem)

    def clean_posix_group(self) -> str:
        return self._checked("posix_group", lambda v: posix_name_problem(v, what="group"))

    def clean_k8s_user(self) -> str:
        return self._checked("k8s_user", k8s_user_problem)


@admin.register(ClusterIdentity)
class ClusterIdentityAdmin(admin.ModelAdmin):
    """Writes go through the audited service, as the API's do."""

    form = ClusterIdentityForm
    list_display = ("user", "posix_user", "posix_group", "k8s_user", "source", "updated_at")
    search_fields = ("user__username", "posix_user", "k8s_user")

    def get_readonly_fields(self, request, obj=None):
        return ("user",) if obj else ()

    def save_model(self, request, obj, form, change) -> None:
        cluster_identity_set(
            actor=request.user,
            user=obj.user,
            posix_user=obj.posix_user,
            posix_group=obj.posix_group,
            k8s_user=obj.k8s_user,
        )

    def delete_model(self, request, obj) -> None:
        cluster_identity_clear(actor=request.user, user=obj.user)
