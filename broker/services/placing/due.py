"""Which waiting workloads a placement pass looks at: those whose pause after a fruitless
look has run out, and those due anyway (``_due_anyway``)."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Max

from broker.models import Cluster
from broker.placement.policy import Aging
from broker.services.fleet.policy import current_policy

# a waiting workload as the pass reads it: id, created_at, GPU class id, GPUs, origin,
# cancel requested at, its retry's "at" and "since" (ISO text, from the placement record)
QueueRow = tuple[int, datetime, int, int, str, datetime | None, str | None, str | None]


def due_ids(rows: list[QueueRow], now: datetime) -> list[int]:
    """The ids due now, in the rows' order; the last capacity change and the policy are read
    only when some workload still pauses."""
    paused = [row for row in rows if not _pause_over(row, now)]
    changed = Cluster.objects.aggregate(at=Max("capacity_changed_at"))["at"] if paused else None
    aging = current_policy().policy.aging if paused else None
    return [row[0] for row in rows if _pause_over(row, now) or _due_anyway(row, now, changed, aging)]


def _pause_over(row: QueueRow, now: datetime) -> bool:
    retry_at = row[6]
    return not retry_at or datetime.fromisoformat(retry_at) <= now


def _due_anyway(row: QueueRow, now: datetime, capacity_changed_at: datetime | None, aging: Aging | None) -> bool:
    """Looked at although its pause after a fruitless look runs on: a report of changed
    capacity came after that look (freed GPUs are offered in the next pass, not after a
    pause of up to RETRY_CAP_S), or it is a big gang past its hold age, which may take a
    pool to drain in any pass (``should_hold_for_gang``: the one rule that reads the clock)."""
    since = row[7]
    if since is not None and capacity_changed_at is not None and datetime.fromisoformat(since) < capacity_changed_at:
        return True
    return aging is not None and row[3] >= aging.big_gang_gpus and (now - row[1]).total_seconds() >= aging.hold_after_s
