"""The API of accounting: a member's GPU-hours per project and GPU class, and finance's
chargeback (JSON, or the page's CSV and XLSX exports).  Thin: reads in ``accounting.selectors``."""

from __future__ import annotations

from django.urls import path
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import serializers
from rest_framework.generics import ListAPIView
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounting.exports import chargeback_csv, chargeback_xlsx
from accounting.periods import parse_month, this_month
from accounting.selectors import chargeback_report, usage_mine
from accounting.services.budgets import budget_standings

MONTH = OpenApiParameter(
    "month", str, pattern=r"^2\d{3}-(0[1-9]|1[0-2])$", description="YYYY-MM; this month when not given"
)


class MonthIn(serializers.Serializer):
    """Query parameters (other parameters, such as a cache buster, are ignored)."""

    month = serializers.RegexField(
        r"^2\d{3}-(0[1-9]|1[0-2])$",
        required=False,
        error_messages={"invalid": "must be a month as YYYY-MM (2000-2999)."},
    )


class ChargebackIn(MonthIn):
    months = serializers.IntegerField(min_value=1, max_value=24, default=1)
    tenant = serializers.SlugField(required=False, help_text="Only this tenant (slug)")
    project = serializers.SlugField(required=False, help_text="Only this project of the tenant (slug)")
    format = serializers.ChoiceField(choices=["json", "csv", "xlsx"], default="json")


class UsageOut(serializers.Serializer):
    tenant = serializers.CharField(source="project.tenant.slug")
    project = serializers.CharField(source="project.slug")
    project_id = serializers.IntegerField(source="project.id")
    gpu_class = serializers.CharField()
    ended_gpu_hours = serializers.DecimalField(
        max_digits=20, decimal_places=2, source="ended_hours", coerce_to_string=False
    )
    running_gpu_hours = serializers.DecimalField(
        max_digits=20, decimal_places=2, source="running_hours", coerce_to_string=False
    )
    jobs = serializers.IntegerField()


@extend_schema_field({"type": "string", "pattern": r"^\d{4}-\d{2}$", "example": "2026-11"})
class MonthField(serializers.Field):
    """A month as YYYY-MM (read only)."""

    def to_representation(self, value) -> str:
        return f"{value:%Y-%m}"


def _money(**kw) -> serializers.DecimalField:
    return serializers.DecimalField(max_digits=20, decimal_places=2, coerce_to_string=False, **kw)


# the figures of a chargeback row, and of the totals: the CSV's columns, which add up
class ChargebackTotalsOut(serializers.Serializer):
    onprem_gpu_hours = _money(source="onprem_hours")
    onprem_cost = _money()
    cloud_gpu_hours = _money(source="cloud_hours")
    cloud_cost = _money(help_text="Billed: the matched bill lines (egress apart)")
    cloud_estimated_gpu_hours = _money(
        source="cloud_estimated_hours", help_text="Cloud GPU-hours no bill line covers yet (part of cloud_gpu_hours)"
    )
    cloud_estimated_cost = _money(help_text="Those hours priced at the cluster's list price, until their bill comes")
    egress_cost = _money(help_text="The bills' data-transfer-out lines")
    gpu_hours = _money()
    cost = _money(help_text="onprem_cost + cloud_cost + cloud_estimated_cost + egress_cost")
    status = serializers.SerializerMethodField(help_text="final, or estimated when part of the cost is an estimate")

    def get_status(self, obj) -> str:
        return "estimated" if obj.estimated else "final"


class _ChargebackKey(serializers.Serializer):
    month = MonthField()
    tenant = serializers.CharField()
    project = serializers.CharField()
    user = serializers.CharField(
        help_text="Who is charged: the submitter, else the person whose cluster "
        "identity the job ran as, else the cluster user, else (unassigned)"
    )
    gpu_class = serializers.CharField()


# a row: its key (month, tenant, project, user, GPU class), then its figures
class ChargebackRowOut(_ChargebackKey, ChargebackTotalsOut):
    pass


class ChargebackOut(serializers.Serializer):
    months = serializers.ListField(child=MonthField())
    rows = ChargebackRowOut(many=True)
    totals = ChargebackTotalsOut()


def _month(request: Request, serializer_class=MonthIn) -> tuple:
    # a plain dict: DRF would take an empty "?month=" from a QueryDict as "not given"
    data = serializer_class(data=request.query_params.dict())
    data.is_valid(raise_exception=True)
    raw = data.validated_data.get("month")
    return (parse_month(raw) if raw else this_month()), data.validated_data


@extend_schema_view(get=extend_schema(parameters=[MONTH]))
class UsageList(ListAPIView):
    """GPU-hours of the caller's projects in a month, per project and GPU class."""

    serializer_class = UsageOut

    def get_queryset(self):
        month, _ = _month(self.request)
        return usage_mine(user=self.request.user, month=month)


class CsvRenderer(BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        return data if isinstance(data, bytes) else b""


class XlsxRenderer(BaseRenderer):
    media_type = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    format = "xlsx"
    charset = None  # a binary file
    render = CsvRenderer.render  # the view hands over the finished file


class Chargeback(APIView):
    """Finance's chargeback: the same rows and totals as the page and its CSV and XLSX exports."""

    renderer_classes = [JSONRenderer, CsvRenderer, XlsxRenderer]

    @extend_schema(
        parameters=[ChargebackIn],
        responses={
            (200, "application/json"): ChargebackOut,
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="the page's CSV export"),
            (200, XlsxRenderer.media_type): OpenApiResponse(OpenApiTypes.BINARY, description="the page's XLSX export"),
        },
    )
    def get(self, request: Request) -> Response | HttpResponse:
        month, params = _month(request, ChargebackIn)
        report = chargeback_report(
            user=request.user,
            first=month,
            months=params["months"],
            tenant_slug=params.get("tenant", ""),
            project_slug=params.get("project", ""),
        )
        if params["format"] == "csv":
            response = HttpResponse(chargeback_csv(report), content_type="text/csv; charset=utf-8")
            response["Content-Disposition"] = f'attachment; filename="chargeback-{month:%Y-%m}.csv"'
            return response
        if params["format"] == "xlsx":
            response = HttpResponse(chargeback_xlsx(report), content_type=XlsxRenderer.media_type)
            response["Content-Disposition"] = f'attachment; filename="chargeback-{month:%Y-%m}.xlsx"'
            return response
        return Response(ChargebackOut(report).data)

    def handle_exception(self, exc):
        # errors are JSON in the one error shape, whatever format was asked for
        self.request.accepted_renderer, self.request.accepted_media_type = JSONRenderer(), "application/json"
        return super().handle_exception(exc)


class BudgetOut(serializers.Serializer):
    """A GPU-hour budget where it stands: the ledger's use, what live work holds, and a
    forecast to the period's end at the pace so far."""

    name = serializers.CharField(source="budget.name")
    tenant = serializers.CharField(source="budget.tenant")
    project = serializers.CharField(source="budget.project", help_text="Empty: the whole tenant")
    gpu_class = serializers.CharField(source="budget.gpu_class")
    period = serializers.CharField(source="budget.period")
    kind = serializers.CharField(source="budget.kind", help_text="hard: refuses work past it; soft: warns")
    start = serializers.DateField()
    end = serializers.DateField(help_text="The first day of the next period")
    gpu_hours = serializers.DecimalField(source="budget.gpu_hours", max_digits=14, decimal_places=2)
    used_hours = serializers.DecimalField(max_digits=14, decimal_places=2, help_text="The ledger's, every backend")
    used_cost = _money(help_text="The chargeback's money for the used hours")
    held_hours = serializers.DecimalField(
        max_digits=14, decimal_places=2, help_text="Queued and running work: GPUs x time limit, returned at its end"
    )
    asked_hours = serializers.DecimalField(max_digits=14, decimal_places=2)
    remaining_hours = serializers.DecimalField(max_digits=14, decimal_places=2)
    share = serializers.FloatField(help_text="Used, held and asked over the budget")
    warn_share = serializers.FloatField(source="budget.warn_share")
    forecast_hours = serializers.DecimalField(
        max_digits=14, decimal_places=2, help_text="Use at the period's end at its pace so far"
    )
    rate = _money(help_text="The class's on-prem price per GPU-hour")
    words = serializers.CharField()


class BudgetList(APIView):
    """The GPU-hour budgets of the caller's tenants, now."""

    @extend_schema(responses={200: BudgetOut(many=True)})
    def get(self, request: Request) -> Response:
        return Response(BudgetOut(budget_standings(user=request.user), many=True).data)


# mounted under /api/v1/ by the composition root (config/urls.py)
urlpatterns = [
    path("usage/", UsageList.as_view(), name="api-usage"),
    path("chargeback/", Chargeback.as_view(), name="api-chargeback"),
    path("budgets/", BudgetList.as_view(), name="api-budgets"),
]
