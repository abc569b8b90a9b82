"""REST API: thin views over the same selectors and services as the pages."""
from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.generics import ListAPIView, RetrieveAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from broker.api import serializers as s
from broker.selectors import (
    cluster_get, cluster_list, escalation_get, escalation_list, quota_get, quota_list, workload_get,
    workload_list, workload_timeline,
)
from broker.services.escalations import escalation_acknowledge, escalation_resolve
from broker.services.quota import QuotaBelowUse, quota_set
from broker.services.workloads import workload_cancel, workload_submit
from broker.spec import SpecError
from portal.tenancy.access import roles_of
from portal.tenancy.models import Role


def _require(request: Request, role: str) -> None:
    if role not in roles_of(request.user):
        raise PermissionDenied(f"needs the {role} role")


@extend_schema_view(get=extend_schema(parameters=[
    OpenApiParameter("state", str, description="Only workloads in this state (e.g. queued, running)")]))
class WorkloadListCreate(ListAPIView):
    serializer_class = s.WorkloadOut

    def get_queryset(self):
        return workload_list(user=self.request.user, state=self.request.query_params.get("state", ""))

    @extend_schema(request=s.WorkloadSpecIn, responses={201: s.WorkloadOut})
    def post(self, request: Request) -> Response:
        _require(request, Role.RESEARCHER)
        data = s.WorkloadSpecIn(data=request.data)
        data.is_valid(raise_exception=True)
        spec = dict(data.validated_data)
        project_id = spec.pop("project")
        try:
            workload = workload_submit(user=request.user, project_id=project_id, spec_data=spec)
        except SpecError as exc:
            raise ValidationError(exc.errors) from None
        return Response(s.WorkloadOut(workload).data, status=status.HTTP_201_CREATED)


class WorkloadDetail(RetrieveAPIView):
    serializer_class = s.WorkloadOut

    def get_object(self):
        return workload_get(user=self.request.user, workload_id=self.kwargs["workload_id"])


class WorkloadTimeline(ListAPIView):
    serializer_class = s.AuditOut

    def get_queryset(self):
        return workload_timeline(user=self.request.user, workload_id=self.kwargs["workload_id"])


class WorkloadCancel(APIView):
    @extend_schema(request=None, responses={202: s.WorkloadOut})
    def post(self, request: Request, workload_id: int) -> Response:
        workload = workload_cancel(user=request.user, workload_id=workload_id)
        return Response(s.WorkloadOut(workload).data, status=status.HTTP_202_ACCEPTED)


class QuotaList(ListAPIView):
    serializer_class = s.QuotaOut

    def get_queryset(self):
        _require(self.request, Role.ADMIN)
        return quota_list(user=self.request.user)


class QuotaDetail(APIView):
    @extend_schema(responses={200: s.QuotaOut})
    def get(self, request: Request, quota_id: int) -> Response:
        _require(request, Role.ADMIN)  # the role first: 403 whatever the id, as on the pages
        quota = quota_get(user=request.user, quota_id=quota_id)
        return Response(s.QuotaOut(quota).data)

    @extend_schema(request=s.QuotaIn, responses={200: s.QuotaOut})
    def patch(self, request: Request, quota_id: int) -> Response:
        _require(request, Role.ADMIN)  # the role first: 403 whatever the id, as on the pages
        quota = quota_get(user=request.user, quota_id=quota_id)
        data = s.QuotaIn(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            quota = quota_set(actor=request.user, tenant_id=quota.tenant_id, gpu_class_id=quota.gpu_class_id,
                              limit_gpus=data.validated_data["limit_gpus"],
                              borrow_limit_gpus=data.validated_data.get("borrow_limit_gpus"))
        except QuotaBelowUse as exc:
            raise ValidationError({"limit_gpus": [str(exc)]}) from None
        return Response(s.QuotaOut(quota).data)


class ClusterList(ListAPIView):
    serializer_class = s.ClusterOut

    def get_queryset(self):
        return cluster_list(user=self.request.user)


class ClusterDetail(RetrieveAPIView):
    serializer_class = s.ClusterOut

    def get_object(self):
        return cluster_get(user=self.request.user, cluster_id=self.kwargs["cluster_id"])


class EscalationList(ListAPIView):
    serializer_class = s.EscalationOut

    def get_queryset(self):
        _require(self.request, Role.ADMIN)
        return escalation_list(user=self.request.user)


class EscalationAcknowledge(APIView):
    @extend_schema(request=None, responses={200: s.EscalationOut})
    def post(self, request: Request, escalation_id: int) -> Response:
        _require(request, Role.ADMIN)
        escalation_get(user=request.user, escalation_id=escalation_id)  # then 404 for outsiders
        return Response(s.EscalationOut(escalation_acknowledge(user=request.user, escalation_id=escalation_id)).data)


class EscalationResolve(APIView):
    @extend_schema(request=s.EscalationResolveIn, responses={200: s.EscalationOut})
    def post(self, request: Request, escalation_id: int) -> Response:
        _require(request, Role.ADMIN)
        escalation_get(user=request.user, escalation_id=escalation_id)  # then 404 for outsiders
        data = s.EscalationResolveIn(data=request.data)
        data.is_valid(raise_exception=True)
        esc = escalation_resolve(user=request.user, escalation_id=escalation_id, **data.validated_data)
        return Response(s.EscalationOut(esc).data)
