"""Reads of broker data, always scoped to the acting user (an outsider sees nothing)."""

from __future__ import annotations

import hashlib
import heapq
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone as dt_timezone
from typing import Any

from django.db import connection
from django.db.models import F, OuterRef, Q, QuerySet, Subquery
from django.shortcuts import get_object_or_404

from broker.models import (
    AuditRecord,
    Cluster,
    Escalation,
    GpuClass,
    Quota,
    ReplayEstimate,
    SimulatorCalibration,
    Reservation,
    Workload,
    WorkloadState,
)
from broker.models.workload import TERMINAL_STATES
from portal.tenancy.access import AnyUser, is_operator, projects_for, tenants_for
from portal.tenancy.models import Project, Role

WORKLOAD_ROLES = (Role.RESEARCHER, Role.ADMIN)
NEWEST_MAX_PROJECTS = 100  # the queue's pages: above this, per-project probes stop paying off
PAGE_SIZE = 50
_EPOCH = datetime(1970, 1, 1, tzinfo=dt_timezone.utc)


def workload_list(*, user: AnyUser, project_id: int | None = None, state: str = "") -> QuerySet[Workload]:
    qs = Workload.objects.filter(project__in=_workload_projects(user)).select_related("project", "cluster", "gpu_class")
    if project_id is not None:
        qs = qs.filter(project_id=project_id)
    if state:
        qs = qs.filter(state=state)
    return qs


def _workload_projects(user: AnyUser):
    return projects_for(user) if is_operator(user) else projects_for(user, *WORKLOAD_ROLES)


def workload_newest(*, user: AnyUser, state: str = "", limit: int = 200) -> QuerySet[Workload]:
    """The ``limit`` newest workloads the user may see, newest first (the queue's first page)."""
    ids = [pk for _, pk in _page_keys(user, state, None, newest_first=True, n=limit)]
    return _rows(ids)


@dataclass(frozen=True)
class Cursor:
    """A place in the queue's order (newest first): the (created_at, id) of a row.  Written
    as ``<microseconds since 1970>.<id>``, so a link carries no characters to escape."""

    created_at: datetime
    id: int

    def encode(self) -> str:
        delta = self.created_at - _EPOCH
        return f"{(delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds}.{self.id}"

    @classmethod
    def decode(cls, raw: str) -> "Cursor":
        micros, dot, pk = raw.partition(".")
        if not dot or len(raw) > 40 or not micros.lstrip("-").isdigit() or not pk.isdigit():
            raise ValueError(f"{raw[:40]!r} is not a page cursor")
        try:
            return cls(_EPOCH + timedelta(microseconds=int(micros)), int(pk))
        except OverflowError:
            raise ValueError(f"{raw[:40]!r} is not a page cursor") from None

    @classmethod
    def of(cls, row: dict) -> "Cursor":
        return cls(row["created_at"], row["id"])


@dataclass
class WorkloadPage:
    rows: list[dict]  # QUEUE_FIELDS of each row, newest first
    newer: Cursor | None  # where the page of newer rows ends; None: this is the first page
    older: Cursor | None  # where the page of older rows starts; None: nothing older

    @property
    def live(self) -> bool:
        """Something shown can still change (a row not yet in a final state)."""
        return any(row["state"] not in TERMINAL_STATES for row in self.rows)

    def fingerprint(self) -> str:
        """Changes whenever anything the rows or the page links show changes (the columns a
        row shows that can change are its state, reason and cluster; updated_at besides)."""
        seen = [
            (r["id"], r["state"], r["reason"], r["raw_reason"], r["cluster_name"], str(r["updated_at"]))
            for r in self.rows
        ]
        links = [c.encode() if c else "" for c in (self.newer, self.older)]
        return hashlib.sha256(repr((seen, links)).encode()).hexdigest()[:32]


def workload_page(
    *, user: AnyUser, state: str = "", before: Cursor | None = None, after: Cursor | None = None, limit: int = PAGE_SIZE
) -> WorkloadPage:
    """One page of the queue, newest first: the first page, the ``limit`` rows older than
    ``before``, or the ``limit`` rows newer than ``after``.  Keyset, not offset: a page
    costs the same few index probes however deep it is, and rows arriving meanwhile
    neither repeat nor skip a row across pages."""
    newest_first = after is None
    cursor = before or after
    project_ids = list(_workload_projects(user).order_by().values_list("id", flat=True))
    if connection.vendor == "postgresql" and 1 < len(project_ids) <= NEWEST_MAX_PROJECTS:
        rows = _pg_page_rows(project_ids, state, cursor, newest_first, limit + 1)
        more, rows = len(rows) > limit, rows[:limit]
        rows.sort(key=lambda r: (r["created_at"], r["id"]), reverse=True)
    else:
        keys = _page_keys(user, state, cursor, newest_first=newest_first, n=limit + 1, project_ids=project_ids)
        more, keys = len(keys) > limit, keys[:limit]
        rows = _queue_rows([pk for _, pk in keys])
    if not rows:  # past either end: offer the way back
        return WorkloadPage([], newer=before, older=after)
    first, last = Cursor.of(rows[0]), Cursor.of(rows[-1])
    if newest_first:
        return WorkloadPage(rows, newer=first if before else None, older=last if more else None)
    return WorkloadPage(rows, newer=first if more else None, older=last)


def _page_keys(
    user: AnyUser,
    state: str,
    cursor: Cursor | None,
    *,
    newest_first: bool,
    n: int,
    project_ids: list[int] | None = None,
) -> list[tuple[datetime, int]]:
    """(created_at, id) of the first ``n`` visible rows past ``cursor`` in the page's direction.

    The plain ordered list sorts every visible workload: over several projects the
    (project, -created_at) index cannot give that order, so PostgreSQL reads and sorts all
    of them (about 120 ms for 50,000).  Instead take the first ``n`` of each project from
    that index and keep the first ``n`` of those: a few index probes, whatever the size."""
    order = ("-created_at", "-id") if newest_first else ("created_at", "id")
    bound = _past(cursor, newest_first)
    filters = {"state": state} if state else {}
    if project_ids is None:
        project_ids = list(_workload_projects(user).order_by().values_list("id", flat=True))
    if len(project_ids) > NEWEST_MAX_PROJECTS:  # operators over a large estate: one plain query
        return list(
            workload_list(user=user, state=state).filter(bound).order_by(*order).values_list("created_at", "id")[:n]
        )
    per_project = [
        Workload.objects.filter(bound, project_id=pid, **filters).order_by(*order).values_list("created_at", "id")[:n]
        for pid in project_ids
    ]
    if not per_project:
        return []
    if len(per_project) == 1:
        return list(per_project[0])
    if connection.features.supports_slicing_ordering_in_compound:  # PostgreSQL: one query
        return list(per_project[0].union(*per_project[1:], all=True).order_by(*order)[:n])
    pick = heapq.nlargest if newest_first else heapq.nsmallest  # SQLite: small queries, merged here
    return pick(n, (row for part in per_project for row in part))


def _past(cursor: Cursor | None, newest_first: bool) -> Q:
    if cursor is None:
        return Q()
    at, pk = cursor.created_at, cursor.id
    if newest_first:  # the plain range first, so the index bounds the scan; the tie on id after
        return Q(created_at__lte=at) & (Q(created_at__lt=at) | Q(id__lt=pk))
    return Q(created_at__gte=at) & (Q(created_at__gt=at) | Q(id__gt=pk))


# What a queue row shows, read as plain values: building 50 model instances with three
# related ones each cost more than the query itself, on every refresh of every open tab.
QUEUE_FIELDS = {
    "project_slug": F("project__slug"),
    "gpu_class_slug": F("gpu_class__slug"),
    "cluster_name": F("cluster__name"),
}


_QUEUE_COLUMNS = ("id", "uid", "name", "state", "reason", "raw_reason", "total_gpus", "created_at", "updated_at")


def _queue_rows(ids: list[int]) -> list[dict]:
    rows = list(
        Workload.objects.filter(id__in=ids).order_by("-created_at", "-id").values(*_QUEUE_COLUMNS, **QUEUE_FIELDS)
    )
    return _labelled(rows)


def _labelled(rows: list[dict]) -> list[dict]:
    labels = dict(WorkloadState.choices)
    for row in rows:
        row["state_label"] = labels.get(row["state"], row["state"])
        row["wait_reason"] = "" if row["reason"] in ("", "none") else row["reason"]  # "none": not waiting
    return rows


def _pg_page_rows(project_ids: list[int], state: str, cursor: Cursor | None, newest_first: bool, n: int) -> list[dict]:
    """PostgreSQL: the page in one query.  For each project, the first ``n`` rows past the
    cursor come from its (project, -created_at) index (LATERAL, a LIMIT each); the first ``n``
    of those are joined to their names.  Raw SQL on purpose: the ORM's UNION of one subquery
    per project cost more to compile than to run, on every refresh of every open tab."""
    cmp, order = ("<", "DESC") if newest_first else (">", "ASC")
    where: list[str] = ["w.project_id = p.id"]
    params: list[Any] = []
    if state:
        where.append("w.state = %s")
        params.append(state)
    if cursor is not None:  # the plain range bounds the index scan; the id breaks the tie
        where.append(f"w.created_at {cmp}= %s AND (w.created_at {cmp} %s OR w.id {cmp} %s)")
        params += [cursor.created_at, cursor.created_at, cursor.id]
    names = ", ".join(f"w.{c}" for c in _QUEUE_COLUMNS)
    sql = (
        f"SELECT k.*, pr.slug, gc.slug, cl.name FROM unnest(%s::bigint[]) AS p(id) "
        f"CROSS JOIN LATERAL (SELECT {names}, w.project_id, w.gpu_class_id, w.cluster_id "
        f"FROM {Workload._meta.db_table} w WHERE {' AND '.join(where)} "
        f"ORDER BY w.created_at {order}, w.id {order} LIMIT %s) k "
        f"JOIN {Project._meta.db_table} pr ON pr.id = k.project_id "
        f"LEFT JOIN {GpuClass._meta.db_table} gc ON gc.id = k.gpu_class_id "
        f"LEFT JOIN {Cluster._meta.db_table} cl ON cl.id = k.cluster_id "
        f"ORDER BY k.created_at {order}, k.id {order} LIMIT %s"
    )
    keys = (*_QUEUE_COLUMNS, "project_id", "gpu_class_id", "cluster_id", *QUEUE_FIELDS)
    with connection.cursor() as cur:
        cur.execute(sql, [project_ids, *params, n, n])
        rows = [dict(zip(keys, row, strict=True)) for row in cur.fetchall()]
    return _labelled(rows)


def _rows(ids: list[int]) -> QuerySet[Workload]:
    # the rows show no spec or placement: skip decoding their JSON documents on every refresh
    return (
        Workload.objects.filter(id__in=ids)
        .select_related("project", "cluster", "gpu_class")
        .defer("spec", "placement", "tried_clusters")
        .order_by("-created_at", "-id")
    )


def workload_get(*, user: AnyUser, workload_id: int) -> Workload:
    return get_object_or_404(workload_list(user=user), id=workload_id)


def workload_timeline(*, user: AnyUser, workload_id: int) -> QuerySet[AuditRecord]:
    workload = workload_get(user=user, workload_id=workload_id)
    return AuditRecord.objects.filter(workload=workload).select_related("actor")


def _admin_tenants(user: AnyUser):
    return tenants_for(user) if is_operator(user) else tenants_for(user, Role.ADMIN)


def quota_list(*, user: AnyUser) -> QuerySet[Quota]:
    return Quota.objects.filter(tenant__in=_admin_tenants(user)).select_related("tenant", "gpu_class", "owner")


def quota_get(*, user: AnyUser, quota_id: int) -> Quota:
    return get_object_or_404(quota_list(user=user), id=quota_id)


def reservation_list(*, user: AnyUser, live_only: bool = True) -> QuerySet[Reservation]:
    qs = Reservation.objects.filter(tenant__in=_admin_tenants(user)).select_related(
        "workload", "tenant", "gpu_class", "cluster"
    )
    # the owner of the quota the reservation counts against
    owner = Quota.objects.filter(tenant_id=OuterRef("tenant_id"), gpu_class_id=OuterRef("gpu_class_id"))
    qs = qs.annotate(quota_owner=Subquery(owner.values("owner__username")[:1]))
    return qs.filter(state__in=("active", "confirmed")) if live_only else qs


def escalation_list(*, user: AnyUser, include_resolved: bool = False) -> QuerySet[Escalation]:
    """Operators see every escalation; a tenant admin sees those attributed to their tenants."""
    if is_operator(user):
        qs = Escalation.objects.all()
    else:
        qs = Escalation.objects.filter(tenant__in=tenants_for(user, Role.ADMIN))
    if not include_resolved:
        qs = qs.exclude(state="resolved")
    return qs.select_related("cluster", "tenant", "workload")


def escalation_get(*, user: AnyUser, escalation_id: int) -> Escalation:
    return get_object_or_404(escalation_list(user=user, include_resolved=True), id=escalation_id)


def cluster_list(*, user: AnyUser) -> QuerySet[Cluster]:
    """The fleet itself is shared infrastructure: every member of any tenant may look at it."""
    if not _sees_fleet(user):
        return Cluster.objects.none()
    return Cluster.objects.prefetch_related("pools")


def cluster_get(*, user: AnyUser, cluster_id: int) -> Cluster:
    return get_object_or_404(cluster_list(user=user), id=cluster_id)


def replay_estimate_list(*, user: AnyUser, limit: int = 12) -> QuerySet[ReplayEstimate]:
    """The newest recorded replay runs' estimator figures: synthetic tenants on a simulated
    fleet, so like the fleet itself, open to every member of any tenant."""
    if not _sees_fleet(user):
        return ReplayEstimate.objects.none()
    return ReplayEstimate.objects.all()[:limit]


def calibration_list(*, user: AnyUser, limit: int = 6) -> QuerySet[SimulatorCalibration]:
    """The newest calibrations of the simulator against real control planes: figures about
    the simulator, not about any tenant, so open to whoever sees the fleet."""
    if not _sees_fleet(user):
        return SimulatorCalibration.objects.none()
    return SimulatorCalibration.objects.all()[:limit]


def latest_calibration() -> SimulatorCalibration | None:
    """The newest calibration of the simulator, for the replay's report (an operator's
    command, not a page: the figures are about the simulator, no tenant's)."""
    return SimulatorCalibration.objects.first()


def _sees_fleet(user: AnyUser) -> bool:
    return user.is_authenticated and (is_operator(user) or tenants_for(user).exists())
