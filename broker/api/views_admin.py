"""REST API v1, the admin side: quotas, clusters, live reservations, escalations.  ``broker.access`` decides
403 before 404 as on the pages: a wrong role gets 403 whatever the id, an outsider 404."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.generics import ListAPIView, RetrieveAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from broker.api import serializers as s
from broker.access import escalation_for, quota_for
from broker.selectors.workloads import cluster_get, cluster_list, escalation_list, quota_list, reservation_list
from broker.services.following.escalations import escalation_acknowledge, escalation_resolve
from broker.services.quota.reservations import quota_set
from portal.tenancy.access import require_role, signed_in
from portal.tenancy.models import Role


class QuotaList(ListAPIView):
    serializer_class = s.QuotaOut

    def get_queryset(self):
        require_role(self.request.user, Role.ADMIN)
        return quota_list(user=self.request.user)


class QuotaDetail(APIView):
    @extend_schema(responses={200: s.QuotaOut})
    def get(self, request: Request, quota_id: int) -> Response:
        quota = quota_for(user=request.user, quota_id=quota_id)
        return Response(s.QuotaOut(quota).data)

    @extend_schema(request=s.QuotaIn, responses={200: s.QuotaOut})
    def patch(self, request: Request, quota_id: int) -> Response:
        quota = quota_for(user=request.user, quota_id=quota_id)
        data = s.QuotaIn(data=request.data)
        data.is_valid(raise_exception=True)
        change = data.validated_data  # partial: what is not given stays as it is
        quota = quota_set(  # below use: QuotaBelowUse, a 400 naming limit_gpus (the exception handler)
            actor=signed_in(request.user),
            tenant_id=quota.tenant_id,
            gpu_class_id=quota.gpu_class_id,
            limit_gpus=change.get("limit_gpus", quota.limit_gpus),
            borrow_limit_gpus=change.get("borrow_limit_gpus"),
        )
        return Response(s.QuotaOut(quota).data)


class ClusterList(ListAPIView):
    serializer_class = s.ClusterOut
    keyset_ordering = "id"

    def get_queryset(self):
        return cluster_list(user=self.request.user)


class ClusterDetail(RetrieveAPIView):
    serializer_class = s.ClusterOut

    def get_object(self):
        return cluster_get(user=self.request.user, cluster_id=self.kwargs["cluster_id"])


class ReservationList(ListAPIView):
    """The live quota reservations of the tenants one administers (the /reservations/ page's
    rows): a member without the admin role gets 403."""

    serializer_class = s.ReservationOut

    def get_queryset(self):
        require_role(self.request.user, Role.ADMIN)
        return reservation_list(user=self.request.user)


class EscalationList(ListAPIView):
    serializer_class = s.EscalationOut

    def get_queryset(self):
        require_role(self.request.user, Role.ADMIN)
        return escalation_list(user=self.request.user)


class EscalationAcknowledge(APIView):
    @extend_schema(request=None, responses={200: s.EscalationOut})
    def post(self, request: Request, escalation_id: int) -> Response:
        escalation_for(user=request.user, escalation_id=escalation_id)  # 403 or 404 first
        return Response(
            s.EscalationOut(escalation_acknowledge(user=signed_in(request.user), escalation_id=escalation_id)).data
        )


class EscalationResolve(APIView):
    @extend_schema(request=s.EscalationResolveIn, responses={200: s.EscalationOut})
    def post(self, request: Request, escalation_id: int) -> Response:
        escalation_for(user=request.user, escalation_id=escalation_id)  # 403 or 404 first
        data = s.EscalationResolveIn(data=request.data)
        data.is_valid(raise_exception=True)
        esc = escalation_resolve(user=signed_in(request.user), escalation_id=escalation_id, **data.validated_data)
        return Response(s.EscalationOut(esc).data)
