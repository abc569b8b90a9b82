"""The output page of a workload: a tail that follows the job while it runs (htmx asks for
the lines past the last one it has, every 2 s, and the server's 286 ends that once the job
has ended and every line is shown), and pages from any line on."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, HttpResponseBadRequest
from django.shortcuts import render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET

from broker.web.htmx import HtmxHttpRequest
from broker.web.queue import HTMX_STOP_POLLING
from broker.access import workload_for
from broker.workload_logs import log_query, workload_logs_read
from portal.tenancy.refusals import refusal_text
from portal.tenancy.errors import DomainError

PAGE_TAIL = 100  # what the page opens on: the last lines


@login_required
@require_GET
def workload_logs_page(request: HtmxHttpRequest, workload_id: int) -> HttpResponse:
    workload = workload_for(user=request.user, workload_id=workload_id, need="logs")  # 403 or 404 first
    try:
        query = log_query(request.GET, workers=int(workload.spec.get("workers", 1)), default_tail=PAGE_TAIL)
    except DomainError as exc:
        return HttpResponseBadRequest(refusal_text(exc), content_type="text/plain; charset=utf-8")
    logs = workload_logs_read(user=request.user, workload_id=workload_id, query=query)
    page = logs.page
    more = bool(page and page.more)
    # follow while the job may still print, or while lines are left to catch up on
    follow = not logs.gone and (not workload.is_terminal or (more and request.htmx))
    next_offset = logs.next_offset if logs.next_offset is not None else (query.offset or 0)
    context = {
        "w": workload,
        "logs": logs,
        "follow": follow,
        "more": more,
        "next_offset": next_offset,
        "worker": (page.worker if page else query.worker) or "",
        "workers": page.workers if page else (),
    }
    if not request.htmx:
        return render(request, "broker/workload_logs.html", context)
    body = render_to_string("broker/workload_logs.html#lines", context)
    return HttpResponse(body, status=200 if follow else HTMX_STOP_POLLING)
