"""Which waiting workloads a placement pass looks at: those whose pause after a fruitless
look has run out, and those due anyway (``_due_anyway``)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Max

from broker.models import Cluster, GpuPool, Workload
from broker.placement.policy import Aging
from broker.services.fleet.policy import current_policy

# a waiting workload as the pass reads it: id, created_at, GPU class id, GPUs, origin,
# cancel requested at, its retry's "at" and "since" (ISO text, from the placement record)
QueueRow = tuple[int, datetime, int, int, str, datetime | None, str | None, str | None]


def due_ids(rows: list[QueueRow], now: datetime) -> list[int]:
    """The ids due now, in the rows' order; the last capacity change and the policy are read
    only when some workload still pauses."""
    over = {row[0] for row in rows if _pause_over(row, now)}
    paused = [row for row in rows if row[0] not in over]
    changed = Cluster.objects.aggregate(at=Max("capacity_changed_at"))["at"] if paused else None
    aging = current_policy().policy.aging if paused else None
    holding = _holding() if aging is not None and any(_past_hold_age(row, now, aging) for row in paused) else set()
    return [row[0] for row in rows if row[0] in over or _due_anyway(row, now, changed, aging, holding)]


def _holding() -> set[int]:
    """The waiting workloads that hold a pool already (by id)."""
    uids = set(GpuPool.objects.exclude(held_for="").values_list("held_for", flat=True))
    return set(Workload.objects.filter(uid__in=uids).values_list("id", flat=True)) if uids else set()


def _past_hold_age(row: QueueRow, now: datetime, aging: Aging) -> bool:
    return row[3] >= aging.big_gang_gpus and (now - row[1]).total_seconds() >= aging.hold_after_s


def _pause_over(row: QueueRow, now: datetime) -> bool:
    retry_at = row[6]
    return not retry_at or datetime.fromisoformat(retry_at) <= now


def _due_anyway(
    row: QueueRow, now: datetime, capacity_changed_at: datetime | None, aging: Aging | None, holding: set[int]
) -> bool:
    """Looked at although its pause after a fruitless look runs on: a report of changed
    capacity came after that look (freed GPUs are offered in the next pass, not after a
    pause of up to RETRY_CAP_S); it is a big gang past its hold age that holds no pool
    yet, which may take one to drain in any pass (``should_hold_for_gang``); or it passed
    its queue-after age since its last look (the two rules that read the clock)."""
    since = row[7]
    if since is not None and capacity_changed_at is not None and datetime.fromisoformat(since) < capacity_changed_at:
        return True
    if aging is None:
        return False
    return (_past_hold_age(row, now, aging) and row[0] not in holding) or _crossed_queue_age(row, now, aging)


def _crossed_queue_age(row: QueueRow, now: datetime, aging: Aging) -> bool:
    """It reached the age at which it may wait in a destination's queue (``queueing``) after
    its last look: one more look sends it there, whatever its pause."""
    if aging.queue_after_s is None:
        return False
    crossed = row[1] + timedelta(seconds=aging.queue_after_s)
    since = row[7]
    return crossed <= now and (since is None or datetime.fromisoformat(since) < crossed)
