"""REST API v1: the caller (who they are, their projects)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from broker.api import serializers as s
from broker.api.selectors import me
from portal.tenancy.selectors import project_list


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
