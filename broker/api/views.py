"""REST API v1, workloads: thin views over the same selectors and services as the pages."""

from __future__ import annotations

import re

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.generics import ListAPIView, RetrieveAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from broker.api import serializers as s
from broker.api.selectors import workload_attempts
from broker.access import workload_for
from broker.api.services import Submitted, workload_submit_once
from broker.models import WorkloadState
from broker.selectors.workloads import WORKLOAD_ROLES, workload_list, workload_timeline
from broker.services.submitting.workloads import workload_cancel, workload_submit
from portal.tenancy.access import require_role, signed_in
from portal.tenancy.models import Role

IDEMPOTENCY_HEADER = "Idempotency-Key"
_KEY_RE = re.compile(r"^[\x21-\x7e]{1,200}$")  # visible ASCII, as a header carries it


def _idempotency_key(request: Request) -> str:
    key = request.headers.get(IDEMPOTENCY_HEADER)
    if key is not None and not _KEY_RE.match(key):
        raise ValidationError({IDEMPOTENCY_HEADER: ["must be 1 to 200 visible ASCII characters."]})
    return key or ""


@extend_schema_view(
    get=extend_schema(
        parameters=[
            OpenApiParameter(
                "state",
                str,
                enum=list(WorkloadState.values),
                description="Only workloads in this state (e.g. queued, running)",
            )
        ]
    )
)
class WorkloadListCreate(ListAPIView):
    serializer_class = s.WorkloadOut

    def get_queryset(self):
        require_role(self.request.user, *WORKLOAD_ROLES)  # as the page: who may list workloads at all
        state = self.request.query_params.get("state", "")
        if state and state not in WorkloadState.values:
            raise ValidationError({"state": [f"must be one of {', '.join(WorkloadState.values)}."]})
        return workload_list(user=self.request.user, state=state)

    @extend_schema(
        request=s.WorkloadSpecIn,
        parameters=[
            OpenApiParameter(
                IDEMPOTENCY_HEADER,
                str,
                OpenApiParameter.HEADER,
                description=(
                    "Retry-safe creation: a second POST by the same user with the same key answers 200 "
                    "with the workload the first one created"
                ),
            )
        ],
        responses={
            201: s.WorkloadOut,
            200: OpenApiResponse(s.WorkloadOut, "a retry: the workload already created"),
            409: OpenApiResponse(description="the key was used for a different request body"),
        },
    )
    def post(self, request: Request) -> Response:
        require_role(request.user, Role.RESEARCHER)
        key = _idempotency_key(request)
        data = s.WorkloadSpecIn(data=request.data)
        data.is_valid(raise_exception=True)
        spec = dict(data.validated_data)
        project_id = spec.pop("project")
        if key:  # SpecError, IdempotencyKeyReused: the exception handler answers them
            done = workload_submit_once(
                user=signed_in(request.user), project_id=project_id, spec_data=spec, idempotency_key=key
            )
        else:
            done = Submitted(workload_submit(user=signed_in(request.user), project_id=project_id, spec_data=spec), True)
        return Response(
            s.WorkloadOut(done.workload).data, status=status.HTTP_201_CREATED if done.created else status.HTTP_200_OK
        )


class WorkloadDetail(RetrieveAPIView):
    serializer_class = s.WorkloadOut

    def get_object(self):
        return workload_for(user=self.request.user, workload_id=self.kwargs["workload_id"])


class WorkloadTimeline(ListAPIView):
    serializer_class = s.AuditOut
    keyset_ordering = "id"  # oldest first: a timeline reads forwards

    def get_queryset(self):
        workload_for(user=self.request.user, workload_id=self.kwargs["workload_id"])  # 403 or 404 first
        return workload_timeline(user=self.request.user, workload_id=self.kwargs["workload_id"])


class WorkloadAttempts(ListAPIView):
    serializer_class = s.AttemptOut
    keyset_ordering = "id"

    def get_queryset(self):
        workload_for(user=self.request.user, workload_id=self.kwargs["workload_id"])  # 403 or 404 first
        return workload_attempts(user=self.request.user, workload_id=self.kwargs["workload_id"])


class WorkloadExplain(APIView):
    @extend_schema(responses={200: s.ExplainOut})
    def get(self, request: Request, workload_id: int) -> Response:
        workload = workload_for(user=request.user, workload_id=workload_id)
        return Response(s.ExplainOut(s.ExplainOut.shape(workload)).data)


class WorkloadCancel(APIView):
    @extend_schema(request=None, responses={202: s.WorkloadOut})
    def post(self, request: Request, workload_id: int) -> Response:
        workload_for(user=request.user, workload_id=workload_id)
        workload = workload_cancel(user=signed_in(request.user), workload_id=workload_id)
        return Response(s.WorkloadOut(workload).data, status=status.HTTP_202_ACCEPTED)
