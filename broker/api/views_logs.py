"""REST API v1: a workload's output, read through its destination's backend."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.restapi.errors import error_body
from broker.access import workload_for
from broker.workload_logs import LIMIT_MAX, log_query, workload_logs_read


class LogsOut(serializers.Serializer):
    workload = serializers.IntegerField()
    worker = serializers.CharField(help_text="The worker read (0-based); empty where output is one file")
    workers = serializers.ListField(child=serializers.CharField())
    offset = serializers.IntegerField(allow_null=True, help_text="0-based number of the first line")
    lines = serializers.ListField(child=serializers.CharField())
    next_offset = serializers.IntegerField(allow_null=True, help_text="Ask from here for the lines after these")
    more = serializers.BooleanField(help_text="Lines exist past this page already")
    ended = serializers.BooleanField(help_text="The workload has ended: no new lines will come")
    available = serializers.BooleanField()
    gone = serializers.BooleanField(help_text="The destination no longer has the output")
    note = serializers.CharField(help_text="Plain words when there are no lines, or why")


_PARAMS = [
    OpenApiParameter("worker", str, description="Worker number (0-based); default the first"),
    OpenApiParameter("tail", int, description=f"The last N lines (1-{LIMIT_MAX}); not with offset/limit"),
    OpenApiParameter("offset", int, description="First line to read (0-based); default 0"),
    OpenApiParameter("limit", int, description=f"Lines from offset (1-{LIMIT_MAX}); default 200"),
]


class WorkloadLogs(APIView):
    @extend_schema(
        parameters=_PARAMS,
        responses={
            200: LogsOut,
            400: OpenApiResponse(description="a bad query value, named"),
            503: OpenApiResponse(description="the destination did not answer; try again"),
        },
    )
    def get(self, request: Request, workload_id: int) -> Response:
        workload = workload_for(user=request.user, workload_id=workload_id, need="logs")  # 403 or 404 first
        query = log_query(request.query_params, workers=int(workload.spec.get("workers", 1)))  # LogQueryError: 400
        logs = workload_logs_read(user=request.user, workload_id=workload_id, query=query)
        if logs.unreachable:
            return Response(
                error_body("destination_unavailable", logs.note), status=status.HTTP_503_SERVICE_UNAVAILABLE
            )
        page = logs.page
        body = {
            "workload": workload.id,
            "worker": page.worker if page else query.worker,
            "workers": list(page.workers) if page else [],
            "offset": page.offset if page else None,
            "lines": list(page.lines) if page else [],
            "next_offset": logs.next_offset,
            "more": bool(page and page.more),
            "ended": workload.is_terminal,
            "available": page is not None,
            "gone": logs.gone,
            "note": logs.note,
        }
        return Response(LogsOut(body).data)
