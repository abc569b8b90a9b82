"""GPUs the broker has promised that a cluster's last inventory report cannot show yet.

One read for the inventory figures (``gpus_reserved`` / ``gpus_idle``) and for placement
(a node's free GPUs), so the two never disagree.  A workload counts against the pool and
the nodes its placement chose while it is reserved or being dispatched, and once it is
queued or running there if it was dispatched or started after the pool's report was
taken: three 8-GPU jobs into a 16-GPU pool between two reports see the first two.
A job a status poll saw waiting in the destination's queue (queued with a local
reason, not started) counts whatever the report's age: a report shows what runs, so
without it the pool would look free again after the next report and more work would
be sent to queue behind it.  Not before that poll: a job that started at once is in the
next report already, and counting it twice until the poll would hold GPUs that are free.
System-wide reads (no acting user): placement and inventory run for everyone.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Iterable, Mapping

from django.db.models import Q

from broker.models import GpuPool, Workload, WorkloadState
from broker.models.workload import LocalReason
from broker.placement.record import CHOSEN_LOOKUP

PROMISED_STATES = (WorkloadState.RESERVED, WorkloadState.DISPATCHING)
SINCE_REPORT_STATES = (WorkloadState.QUEUED, WorkloadState.RUNNING)
# a queued workload's reason before any poll: cleared when placed, or "none"
NOT_SEEN_WAITING = ("", LocalReason.NONE)


@dataclass
class Promised:
    """What one cluster owes beyond its last report."""

    nodes: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    pools: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    jobs: int = 0


def promised_gpus(
    *, cluster_ids: Iterable[int], taken_at: Mapping[tuple[int, str], datetime] | None = None
) -> dict[int, Promised]:
    """cluster id -> promised GPUs per node and per pool.

    ``taken_at``: (cluster id, pool name) -> when that pool's report was taken; default
    the stored pools' ``taken_at`` (pass the new report's time when storing one)."""
    ids = list(cluster_ids)
    if taken_at is None:
        taken_at = {
            (c, n): t
            for c, n, t in GpuPool.objects.filter(cluster_id__in=ids).values_list("cluster_id", "name", "taken_at")
        }
    oldest = min(taken_at.values(), default=None)
    live = Q(state__in=PROMISED_STATES) | (
        Q(state=WorkloadState.QUEUED, started_at__isnull=True) & ~Q(reason__in=NOT_SEEN_WAITING)
    )
    if oldest is not None:
        live |= Q(state__in=SINCE_REPORT_STATES) & (Q(dispatched_at__gt=oldest) | Q(started_at__gt=oldest))
    out: dict[int, Promised] = {c: Promised() for c in ids}
    # only the chosen candidate of each record: the whole record (every candidate, every
    # exclusion) is ~20 times larger, and a pass reads this for every job sent since the reports
    rows = Workload.objects.filter(live, cluster_id__in=ids).values_list(
        "cluster_id", "state", CHOSEN_LOOKUP, "total_gpus", "dispatched_at", "started_at", "reason"
    )
    for cluster_id, state, chosen_or_none, total, dispatched, started, reason in rows:
        chosen = chosen_or_none if isinstance(chosen_or_none, dict) else {}
        pool = chosen.get("pool", "")
        if state not in PROMISED_STATES and not _waiting_there(state, started, reason):
            report = taken_at.get((cluster_id, pool))
            if report is None or not _after(report, dispatched, started):
                continue
        promised = out[cluster_id]
        promised.pools[pool] += total
        promised.jobs += 1
        for node in chosen.get("assignment", []):
            promised.nodes[node] += int(chosen.get("gpus_per_worker", 0))
    return out


def _waiting_there(state: str, started: datetime | None, reason: str) -> bool:
    """A status poll saw it pending at its destination (the local reason it gave)."""
    return state == WorkloadState.QUEUED and started is None and reason not in NOT_SEEN_WAITING


def _after(report: datetime, *moments: datetime | None) -> bool:
    return any(m is not None and m > report for m in moments)
