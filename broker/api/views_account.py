"""REST API v1: the caller (me, projects, tokens) and accounting (usage, chargeback)."""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import status
from rest_framework.generics import ListAPIView
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounting.exports import chargeback_csv, chargeback_xlsx
from accounting.periods import parse_month, this_month
from accounting.selectors import chargeback_report, usage_mine
from broker.api import serializers as s
from broker.api.selectors import me
from portal.apitokens.selectors import token_list
from portal.apitokens.services.tokens import token_create, token_revoke
from portal.tenancy.selectors import project_list
from portal.tenancy.access import signed_in

MONTH = OpenApiParameter(
    "month", str, pattern=r"^2\d{3}-(0[1-9]|1[0-2])$", description="YYYY-MM; this month when not given"
)


class Me(APIView):
    @extend_schema(responses={200: s.MeOut})
    def get(self, request: Request) -> Response:
        return Response(s.MeOut(me(user=request.user)).data)


class ProjectList(ListAPIView):
    """The projects the caller belongs to (their ids are what a workload's ``project`` takes)."""

    serializer_class = s.ProjectOut
    keyset_ordering = "id"

    def get_queryset(self):
        return project_list(user=self.request.user)


class TokenListCreate(ListAPIView):
    """The caller's own API tokens (never a secret), and a new one (its secret shown once)."""

    serializer_class = s.TokenOut

    def get_queryset(self):
        return token_list(user=self.request.user)

    @extend_schema(request=s.TokenIn, responses={201: s.TokenCreatedOut})
    def post(self, request: Request) -> Response:
        data = s.TokenIn(data=request.data)
        data.is_valid(raise_exception=True)
        new = token_create(actor=signed_in(request.user), **data.validated_data)
        return Response(s.TokenCreatedOut(new).data, status=status.HTTP_201_CREATED)


class TokenRevoke(APIView):
    @extend_schema(request=None, responses={204: OpenApiResponse(description="revoked")})
    def delete(self, request: Request, token_id: int) -> Response:
        token_revoke(actor=signed_in(request.user), token_id=token_id)  # 404 for another user's token
        return Response(status=status.HTTP_204_NO_CONTENT)


def _month(request: Request, serializer_class=s.MonthIn) -> tuple:
    # a plain dict: DRF would take an empty "?month=" from a QueryDict as "not given"
    data = serializer_class(data=request.query_params.dict())
    data.is_valid(raise_exception=True)
    raw = data.validated_data.get("month")
    return (parse_month(raw) if raw else this_month()), data.validated_data


@extend_schema_view(get=extend_schema(parameters=[MONTH]))
class UsageList(ListAPIView):
    """GPU-hours of the caller's projects in a month, per project and GPU class."""

    serializer_class = s.UsageOut

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
        parameters=[s.ChargebackIn],
        responses={
            (200, "application/json"): s.ChargebackOut,
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="the page's CSV export"),
            (200, XlsxRenderer.media_type): OpenApiResponse(OpenApiTypes.BINARY, description="the page's XLSX export"),
        },
    )
    def get(self, request: Request) -> Response | HttpResponse:
        month, params = _month(request, s.ChargebackIn)
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
        return Response(s.ChargebackOut(report).data)

    def handle_exception(self, exc):
        # errors are JSON in the one error shape, whatever format was asked for
        self.request.accepted_renderer, self.request.accepted_media_type = JSONRenderer(), "application/json"
        return super().handle_exception(exc)
