"""Reading a workload's output through its destination's backend (a read: no write here).

Only the job's own people read its output: researchers of its project and the admins of
its tenant.  Anyone else, platform operators included, gets the same 404 as for a job
that does not exist, because output may hold what the project would not show.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from django.shortcuts import get_object_or_404

from portal.tenancy.numbers import whole_number
from broker.backends.base import BackendError, LogPage, LogsGone, Unavailable
from broker.backends.registry import backend_for
from broker.models import ClusterHealth, Workload
from portal.tenancy.access import AnyUser, projects_for
from portal.tenancy.errors import DomainError
from portal.tenancy.models import Role

LIMIT_MAX = 1000
DEFAULT_LIMIT = 200
QUERY_FIELDS = ("worker", "tail", "offset", "limit")


class LogQueryError(DomainError, ValueError):
    """Bad query values: field name -> messages (the API's 400 names each field)."""

    def __init__(self, errors: dict[str, list[str]]):
        super().__init__("; ".join(f"{k}: {' '.join(v)}" for k, v in errors.items()))
        self.errors = errors

    def field_messages(self) -> dict[str, list[str]]:
        return {str(k): [str(m) for m in v] for k, v in self.errors.items()}


@dataclass(frozen=True)
class LogQuery:
    worker: str = ""
    tail: int | None = None
    offset: int | None = None
    limit: int = DEFAULT_LIMIT


@dataclass(frozen=True)
class WorkloadLogs:
    workload: Workload
    page: LogPage | None
    note: str = ""  # plain words when there is no page, or it is not the whole story
    gone: bool = False  # the destination no longer has the output
    unreachable: bool = False  # the destination did not answer: try again

    @property
    def next_offset(self) -> int | None:
        return None if self.page is None else self.page.offset + len(self.page.lines)


def _count(params: Mapping[str, str], name: str, low: int, high: int, errors: dict) -> int | None:
    raw = params.get(name)
    if raw is None or raw == "":
        return None
    value = whole_number(raw)
    if value is None or not low <= value <= high:
        errors[name] = [f"must be a whole number from {low} to {high}."]
        return None
    return value


def log_query(params: Mapping[str, str], *, workers: int, default_tail: int | None = None) -> LogQuery:
    """The query of a log read, checked; LogQueryError names every bad field."""
    errors: dict[str, list[str]] = {}
    unknown = sorted(set(params) - set(QUERY_FIELDS))
    for name in unknown:
        errors[name] = [f"unknown field; known: {', '.join(QUERY_FIELDS)}."]
    worker = params.get("worker", "")
    number = whole_number(worker)
    if worker and (number is None or number >= workers):
        errors["worker"] = [f"must be a worker number from 0 to {workers - 1}."]
    tail = _count(params, "tail", 1, LIMIT_MAX, errors)
    offset = _count(params, "offset", 0, 10**9, errors)
    limit = _count(params, "limit", 1, LIMIT_MAX, errors)
    if tail is not None and (offset is not None or limit is not None):
        errors["tail"] = ["give tail, or offset and limit, not both."]
    if errors:
        raise LogQueryError(errors)
    if tail is None and offset is None:
        tail = default_tail
    return LogQuery(
        worker=str(int(worker)) if worker else "",
        tail=tail,
        offset=None if tail is not None else (offset or 0),
        limit=limit or DEFAULT_LIMIT,
    )


def workload_for_logs(*, user: AnyUser, workload_id: int) -> Workload:
    """The workload, if the user is one of its people; else 404."""
    mine = projects_for(user, Role.RESEARCHER, Role.ADMIN)
    return get_object_or_404(Workload.objects.filter(project__in=mine).select_related("cluster"), id=workload_id)


def workload_logs_read(*, user: AnyUser, workload_id: int, query: LogQuery) -> WorkloadLogs:
    workload = workload_for_logs(user=user, workload_id=workload_id)
    if workload.cluster is None or not workload.destination_job_id:
        return WorkloadLogs(workload, None, "The job has not reached a cluster, so it has no output yet.")
    try:
        backend = backend_for(workload.cluster)
        if not hasattr(backend, "logs"):  # a backend that is no LogReader
            return WorkloadLogs(
                workload,
                None,
                f"The broker cannot read the output of jobs on {workload.cluster.name} ({workload.cluster.kind}).",
            )
        page = backend.logs(
            workload.destination_job_id, worker=query.worker, offset=query.offset, limit=query.limit, tail=query.tail
        )
    except LogsGone as exc:
        return WorkloadLogs(
            workload, None, f"{workload.cluster.name} no longer has this job's output ({exc}).", gone=True
        )
    except Unavailable as exc:
        return WorkloadLogs(
            workload, None, f"{workload.cluster.name} did not answer; try again ({exc}).", unreachable=True
        )
    except BackendError as exc:  # a standing reason, such as a cluster set up without file access
        return WorkloadLogs(
            workload, None, f"The broker cannot read the output of jobs on {workload.cluster.name}: {exc}."
        )
    note = "" if page.lines or page.offset else "No output yet."
    return WorkloadLogs(workload, page, note)


def workload_last_lines(*, user: AnyUser, workload: Workload, lines: int = 20) -> WorkloadLogs | None:
    """The last lines the workload page shows: None before the job reached a cluster, and
    for users who may see the workload but not its output (operators of other tenants)."""
    if workload.cluster_id is None or not workload.destination_job_id:
        return None
    if not projects_for(user, Role.RESEARCHER, Role.ADMIN).filter(id=workload.project_id).exists():
        return None
    if workload.cluster is not None and workload.cluster.health == ClusterHealth.STALE:
        # a silent cluster would hold the page for the whole backend timeout
        return WorkloadLogs(
            workload,
            None,
            f"{workload.cluster.name} is not answering; its output is shown once it does.",
            unreachable=True,
        )
    return workload_logs_read(user=user, workload_id=workload.id, query=LogQuery(tail=lines))
