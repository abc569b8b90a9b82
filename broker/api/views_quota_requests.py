"""REST API v1: quota requests (ask, follow, decide).  Thin: the services decide."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from broker.api.serializers import MAX_ID
from portal.restapi.strict import StrictSerializer
from broker.access import quota_request_for
from broker.models import AuditRecord, QuotaRequest
from broker.selectors.quota_requests import quota_request_list, quota_request_trail
from broker.services.quota.requests import quota_request_create, quota_request_decide
from portal.tenancy.access import require_role, signed_in
from portal.tenancy.models import Role

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from broker.models import GpuClass
    from portal.tenancy.models import Tenant


class QuotaRequestIn(StrictSerializer):
    project = serializers.IntegerField(min_value=1, max_value=MAX_ID, help_text="Project id")
    gpu_class = serializers.CharField()
    extra_gpus = serializers.IntegerField(min_value=1, max_value=1_000_000)
    reason = serializers.CharField()
    ends_on = serializers.DateField(help_text="YYYY-MM-DD; the raise lasts to the end of this day (UTC)")


class DecisionIn(StrictSerializer):
    decision = serializers.ChoiceField(choices=["approve", "refuse"])
    note = serializers.CharField(required=False, allow_blank=True, default="")


class TrailOut(serializers.ModelSerializer):
    actor: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = AuditRecord
        fields = ["created_at", "action", "actor", "message"]


class QuotaRequestOut(serializers.ModelSerializer):
    project = serializers.IntegerField(source="project_id")
    tenant: serializers.SlugRelatedField[Tenant] = serializers.SlugRelatedField(
        source="quota.tenant", slug_field="slug", read_only=True
    )
    gpu_class: serializers.SlugRelatedField[GpuClass] = serializers.SlugRelatedField(
        source="quota.gpu_class", slug_field="slug", read_only=True
    )
    owner: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        source="quota.owner", slug_field="username", read_only=True
    )
    requester: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(slug_field="username", read_only=True)
    decided_by: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(slug_field="username", read_only=True)
    limit_gpus = serializers.IntegerField(source="quota.limit_gpus", help_text="The quota's limit now")
    # plain text, not an enum: the schema already has a "state" enum (workloads) of other values
    state = serializers.CharField(read_only=True, help_text="pending, approved, refused or ended")

    class Meta:
        model = QuotaRequest
        fields = [
            "id",
            "project",
            "tenant",
            "gpu_class",
            "owner",
            "requester",
            "extra_gpus",
            "reason",
            "ends_on",
            "state",
            "decided_by",
            "decided_at",
            "note",
            "ended_at",
            "created_at",
            "limit_gpus",
        ]
        read_only_fields = fields


class QuotaRequestDetailOut(QuotaRequestOut):
    trail = serializers.SerializerMethodField()

    class Meta(QuotaRequestOut.Meta):
        fields = [*QuotaRequestOut.Meta.fields, "trail"]
        read_only_fields = fields

    @extend_schema(responses=TrailOut(many=True))
    def get_trail(self, item: QuotaRequest) -> list[dict]:
        return cast(list[dict], TrailOut(quota_request_trail(request=item), many=True).data)  # many=True: a list


class QuotaRequestListCreate(ListAPIView):
    serializer_class = QuotaRequestOut

    def get_queryset(self):
        return quota_request_list(user=self.request.user)

    @extend_schema(request=QuotaRequestIn, responses={201: QuotaRequestDetailOut})
    def post(self, request: Request) -> Response:
        require_role(request.user, Role.RESEARCHER)
        data = QuotaRequestIn(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        made = quota_request_create(  # QuotaRequestRefused: a 400 naming its field
            user=signed_in(request.user),
            project_id=v["project"],
            gpu_class=v["gpu_class"],
            extra_gpus=v["extra_gpus"],
            reason=v["reason"],
            ends_on=v["ends_on"],
        )
        return Response(QuotaRequestDetailOut(made).data, status=status.HTTP_201_CREATED)


class QuotaRequestDetail(APIView):
    @extend_schema(responses={200: QuotaRequestDetailOut})
    def get(self, request: Request, quota_request_id: int) -> Response:
        return Response(
            QuotaRequestDetailOut(quota_request_for(user=request.user, quota_request_id=quota_request_id)).data
        )


class QuotaRequestDecision(APIView):
    @extend_schema(request=DecisionIn, responses={200: QuotaRequestDetailOut})
    def post(self, request: Request, quota_request_id: int) -> Response:
        quota_request_for(user=request.user, quota_request_id=quota_request_id)  # 403 or 404 before any 400
        data = DecisionIn(data=request.data)
        data.is_valid(raise_exception=True)
        done = quota_request_decide(
            user=signed_in(request.user),
            request_id=quota_request_id,
            approve=data.validated_data["decision"] == "approve",
            note=data.validated_data["note"],
        )
        return Response(QuotaRequestDetailOut(done).data)
