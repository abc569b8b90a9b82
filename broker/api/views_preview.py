"""REST API v1: preview a submission (placement without reserving anything)."""

from __future__ import annotations

from accounting.api import BudgetOut
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from broker.api.serializers import ExplainExclusionOut, WorkloadSpecIn
from broker.services.submitting.preview import Preview, workload_preview
from broker.web.explain import RULE_WORDS
from portal.tenancy.access import require_role, signed_in
from portal.tenancy.models import Role


class DestinationOut(serializers.Serializer):
    rank = serializers.IntegerField()
    cluster = serializers.CharField()
    pool = serializers.CharField()
    location = serializers.CharField()
    score = serializers.FloatField()
    terms = serializers.DictField(child=serializers.FloatField(), help_text="Each ranking term in its own unit")
    weighted = serializers.DictField(child=serializers.FloatField())
    queue_wait_s = serializers.FloatField(help_text="Estimated wait in the destination's queue")
    expected_start = serializers.DateTimeField(help_text="Now + queue wait + start-up (image pull, staging)")
    gpu_hours = serializers.FloatField()
    rate_per_gpu_hour = serializers.DecimalField(max_digits=12, decimal_places=4)
    gpu_cost = serializers.DecimalField(max_digits=14, decimal_places=2)
    egress_cost = serializers.DecimalField(max_digits=14, decimal_places=2)
    expected_cost = serializers.DecimalField(max_digits=14, decimal_places=2)
    budget_warning = serializers.CharField()
    topology = serializers.CharField(
        help_text="Where the job prefers a topology level: 'in one rack' or why not; empty otherwise"
    )


class QuotaLeftOut(serializers.Serializer):
    gpu_class = serializers.CharField()
    limit = serializers.IntegerField()
    borrow = serializers.IntegerField()
    used = serializers.IntegerField()
    remaining = serializers.IntegerField()


class PreviewOut(serializers.Serializer):
    project = serializers.IntegerField()
    policy_version = serializers.CharField()
    reason = serializers.CharField(help_text="Why nothing fits now; empty when a destination does")
    queued_after_s = serializers.FloatField(
        allow_null=True,
        help_text="Nothing fits now: the destinations are the queues the job would wait in after this long "
        "at the broker (their queue wait counts it); null when they are where it fits now",
    )
    chosen = DestinationOut(allow_null=True, help_text="Where a submission made now would go")
    destinations = DestinationOut(many=True)
    excluded = ExplainExclusionOut(many=True)
    quota = QuotaLeftOut()
    cloud_budget_month = serializers.DecimalField(max_digits=12, decimal_places=2, allow_null=True)
    cloud_spend_month = serializers.DecimalField(max_digits=14, decimal_places=2)
    warnings = serializers.ListField(child=serializers.CharField())
    budgets = BudgetOut(many=True, help_text="The GPU-hour budgets the job counts against, its ask included")

    @staticmethod
    def shape(preview: Preview) -> dict:
        return {
            "project": preview.project.id,
            "policy_version": preview.policy_version,
            "reason": preview.reason,
            "queued_after_s": preview.queued_after_s,
            "chosen": preview.chosen,
            "destinations": preview.destinations,
            "excluded": [
                {
                    "cluster": name,
                    "rule": e["rule"],
                    "rule_text": RULE_WORDS.get(e["rule"], e["rule"]),
                    "detail": e["message"],
                }
                for name, e in preview.excluded.items()
            ],
            "quota": {
                "gpu_class": preview.gpu_class.slug,
                "limit": preview.quota.limit,
                "borrow": preview.quota.borrow,
                "used": preview.quota.used,
                "remaining": preview.quota.remaining,
            },
            "cloud_budget_month": preview.cloud_budget_month,
            "cloud_spend_month": preview.cloud_spend_month,
            "warnings": preview.warnings,
            "budgets": preview.budgets,
        }


class WorkloadPreview(APIView):
    """Run placement for a spec without storing or reserving anything."""

    @extend_schema(request=WorkloadSpecIn, responses={200: PreviewOut})
    def post(self, request: Request) -> Response:
        require_role(request.user, Role.RESEARCHER)
        data = WorkloadSpecIn(data=request.data)
        data.is_valid(raise_exception=True)
        spec = dict(data.validated_data)
        project_id = spec.pop("project")
        preview = workload_preview(
            user=signed_in(request.user), project_id=project_id, spec_data=spec
        )  # SpecError: 400
        return Response(PreviewOut(PreviewOut.shape(preview)).data)
