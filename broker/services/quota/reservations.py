"""Global quota: reserve, confirm, release, expire.

Invariant 2: per tenant x GPU class, live reservations (held for a job on its way,
or confirmed while it is queued or running) never exceed limit + borrowing.  The
quota row is locked before the sum is read, so concurrent reservations serialise.
"""

from __future__ import annotations

from typing import Mapping

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q, Sum

from broker.failpoints import failpoint
from broker.lifecycle import LIVE_RESERVATION_STATES
from broker.models import AuditRecord, Cluster, GpuClass, Location, Quota, Reservation, Workload
from broker.services.records import moves
from broker.services.records.audit import audit, audit_record
from broker.services.quota.owners import quota_alert_check
from broker.services.records.transitions import Note
from broker import runtime
from portal.tenancy.errors import DomainError


class QuotaExceeded(Exception):
    def __init__(self, *, needed: int, used: int, ceiling: int, gpu_class: str):
        self.needed, self.used, self.ceiling, self.gpu_class = needed, used, ceiling, gpu_class
        super().__init__(f"quota for {gpu_class}: {used} of {ceiling} GPUs in use or reserved, {needed} more needed")


@dataclass(frozen=True)
class QuotaUse:
    limit: int
    borrow: int
    used: int

    @property
    def remaining(self) -> int:
        return max(0, self.limit + self.borrow - self.used)

    def remaining_with(self, burst_gpus: int) -> int:
        """What is left on a cloud cluster, where the policy's burst allowance counts too."""
        return max(0, self.limit + self.borrow + burst_gpus - self.used)


def gpus_in_use(*, tenant_id: int, gpu_class_id: int | None) -> int:
    total = Reservation.objects.filter(
        tenant_id=tenant_id,
        gpu_class_id=gpu_class_id,
        state__in=LIVE_RESERVATION_STATES,
    ).aggregate(n=Sum("gpus"))["n"]
    return int(total or 0)


def quota_use(*, tenant_id: int, gpu_class_id: int | None) -> QuotaUse:
    quota = Quota.objects.filter(tenant_id=tenant_id, gpu_class_id=gpu_class_id).first()
    used = gpus_in_use(tenant_id=tenant_id, gpu_class_id=gpu_class_id)
    if quota is None:
        return QuotaUse(limit=0, borrow=0, used=used)
    return QuotaUse(limit=quota.limit_gpus, borrow=quota.borrow_limit_gpus, used=used)


def _lock_quota(*, tenant_id: int, gpu_class: GpuClass, now: datetime) -> Quota:
    # The UPDATE takes the row's write lock on every database (SQLite has no
    # SELECT ... FOR UPDATE); the select_for_update keeps the intent explicit on PostgreSQL.
    touched = Quota.objects.filter(tenant_id=tenant_id, gpu_class=gpu_class).update(updated_at=now)
    if not touched:
        raise QuotaExceeded(needed=0, used=0, ceiling=0, gpu_class=gpu_class.slug)
    return Quota.objects.select_for_update().get(tenant_id=tenant_id, gpu_class=gpu_class)


@transaction.atomic
def reservation_create(
    *, workload: Workload, cluster: Cluster, ttl_s: int, now: datetime | None = None, burst_gpus: int = 0
) -> Reservation:
    """Hold the workload's GPUs against its tenant's quota; raises QuotaExceeded.

    ``burst_gpus``: the tenant's burst allowance (policy), GPUs above the quota's ceiling
    that it may hold on *cloud* clusters only: on-prem the ceiling stays the ceiling."""
    now = now or runtime.now()
    gpu_class = workload.gpu_class
    if gpu_class is None:  # every submitted workload has one: resolve_gpu_class refuses otherwise
        raise ValueError(f"workload {workload.uid} has no GPU class")
    quota = _lock_quota(tenant_id=workload.tenant_id, gpu_class=gpu_class, now=now)
    existing = Reservation.objects.filter(workload=workload, state__in=LIVE_RESERVATION_STATES).first()
    if existing is not None:
        return existing  # a retried placement must not count the workload twice
    used = gpus_in_use(tenant_id=workload.tenant_id, gpu_class_id=gpu_class.id)
    ceiling = quota.ceiling + (burst_gpus if cluster.location == Location.CLOUD else 0)
    if used + workload.total_gpus > ceiling:
        raise QuotaExceeded(needed=workload.total_gpus, used=used, ceiling=ceiling, gpu_class=gpu_class.slug)
    reservation = Reservation.objects.create(
        workload=workload,
        tenant_id=workload.tenant_id,
        gpu_class=gpu_class,
        cluster=cluster,
        gpus=workload.total_gpus,
        expires_at=now + timedelta(seconds=ttl_s),
    )
    failpoint("quota.after_reserve")
    audit(
        action="reservation.created",
        workload=workload,
        cluster=cluster.name,
        message=f"{workload.total_gpus} {gpu_class.slug} GPUs held until {reservation.expires_at:%H:%M:%S}",
        inputs={"used_before": used, "ceiling": ceiling, "burst": max(0, used + workload.total_gpus - quota.ceiling)},
    )
    quota_alert_check(quota=quota, used=used + workload.total_gpus)
    return reservation


@dataclass
class QuotaLedger:
    """The quota rows of a batch of reservations, locked, and the GPUs their live
    reservations hold: what ``reservation_create`` reads for one workload, read once."""

    now: datetime
    quotas: dict[tuple[int, int | None], Quota]
    used: dict[tuple[int, int | None], int]
    reserved: set[int]  # workloads that already hold a live reservation
    pending: list[tuple[Reservation, int, int]] = field(default_factory=list)  # (row, used before, ceiling)

    def reserve(self, *, workload: Workload, cluster: Cluster, ttl_s: int, burst_gpus: int = 0) -> None:
        """Count the workload's GPUs against its quota (raises QuotaExceeded); ``store`` writes it."""
        if workload.id in self.reserved:
            return  # a retried placement must not count the workload twice
        gpu_class_id = workload.gpu_class_id
        key = (workload.tenant_id, gpu_class_id)
        quota = self.quotas.get(key)
        slug = workload.gpu_class.slug if workload.gpu_class else "?"
        if quota is None or gpu_class_id is None:
            raise QuotaExceeded(needed=0, used=0, ceiling=0, gpu_class=slug)
        used = self.used.get(key, 0)
        ceiling = quota.ceiling + (burst_gpus if cluster.location == Location.CLOUD else 0)
        if used + workload.total_gpus > ceiling:
            raise QuotaExceeded(needed=workload.total_gpus, used=used, ceiling=ceiling, gpu_class=slug)
        self.used[key] = used + workload.total_gpus
        self.reserved.add(workload.id)
        row = Reservation(
            workload=workload,
            tenant_id=workload.tenant_id,
            gpu_class_id=gpu_class_id,
            cluster=cluster,
            gpus=workload.total_gpus,
            expires_at=self.now + timedelta(seconds=ttl_s),
        )
        self.pending.append((row, used, ceiling))

    def store(self) -> list[AuditRecord]:
        """Write the reservations counted since the last call, in one statement, and return
        their audit records, which the caller stores with the rest of its batch's records
        (``audit_many``) in the same transaction."""
        rows, self.pending = self.pending, []
        if not rows:
            return []
        Reservation.objects.bulk_create([row for row, _, _ in rows])
        failpoint("quota.after_reserve")  # as after one reservation: the rows written, not committed
        for key in {(row.tenant_id, row.gpu_class_id) for row, _, _ in rows}:
            quota_alert_check(quota=self.quotas[key], used=self.used[key])
        return [_created_record(row, used, ceiling, self.quotas) for row, used, ceiling in rows]


def _created_record(
    row: Reservation, used: int, ceiling: int, quotas: Mapping[tuple[int, int | None], Quota]
) -> AuditRecord:
    quota = quotas[(row.tenant_id, row.gpu_class_id)]
    return audit_record(
        action="reservation.created",
        workload=row.workload,
        cluster=row.cluster.name if row.cluster else "",
        message=f"{row.gpus} {quota.gpu_class.slug} GPUs held until {row.expires_at:%H:%M:%S}",
        inputs={"used_before": used, "ceiling": ceiling, "burst": max(0, used + row.gpus - quota.ceiling)},
    )


def quota_ledger_lock(*, keys: set[tuple[int, int | None]], workload_ids: list[int], now: datetime) -> QuotaLedger:
    """Lock the quota rows of ``keys`` (tenant id, GPU class id) and read their use, once for
    a batch: inside the caller's transaction, which writes the reservations before it commits."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("quota_ledger_lock: call it inside a transaction")
    match = Q(pk__in=[])
    for tenant_id, gpu_class_id in keys:
        match |= Q(tenant_id=tenant_id, gpu_class_id=gpu_class_id)
    # the UPDATE takes the rows' write locks on every database, as in _lock_quota
    Quota.objects.filter(match).update(updated_at=now)
    quotas: dict[tuple[int, int | None], Quota] = {
        (q.tenant_id, q.gpu_class_id): q
        for q in Quota.objects.select_for_update(of=("self",)).select_related("gpu_class", "tenant").filter(match)
    }
    live = Reservation.objects.filter(state__in=LIVE_RESERVATION_STATES)
    used = {
        (t, c): int(n or 0)
        for t, c, n in live.filter(match).values_list("tenant_id", "gpu_class_id").annotate(n=Sum("gpus"))
    }
    reserved = set(live.filter(workload_id__in=workload_ids).values_list("workload_id", flat=True))
    return QuotaLedger(now=now, quotas=quotas, used=used, reserved=reserved)


def reservation_confirm(*, workload: Workload, cluster: Cluster, now: datetime | None = None) -> bool:
    """The destination acknowledged the job: the hold becomes confirmed usage.  One
    conditional update and its record; inside the caller's transaction when there is one
    (no savepoint: nobody catches an error of it and carries on)."""
    now = now or runtime.now()
    n = moves.reservation_confirm(
        where={"workload": workload},
        fields={"confirmed_at": now, "cluster": cluster},
        note=Note(action="reservation.confirmed", workload=workload, cluster=cluster.name),
        savepoint=False,
    )
    return bool(n)


@transaction.atomic
def reservation_release(*, workload: Workload, reason: str, now: datetime | None = None) -> bool:
    n = moves.reservation_release(
        where={"workload_id": workload.id},
        fields={"ended_at": now or runtime.now(), "end_reason": reason[:200]},
        note=Note(action="reservation.released", workload=workload, message=reason),
    )
    if n:
        _recheck_alert(tenant_id=workload.tenant_id, gpu_class_id=workload.gpu_class_id)
    return bool(n)


def _recheck_alert(*, tenant_id: int, gpu_class_id: int | None) -> None:
    """Use went down: re-arm the owner's alert once it is back under the share."""
    quota = Quota.objects.filter(tenant_id=tenant_id, gpu_class_id=gpu_class_id, alert_active=True).first()
    if quota is not None:
        quota_alert_check(quota=quota, used=gpus_in_use(tenant_id=tenant_id, gpu_class_id=gpu_class_id))


@transaction.atomic
def reservation_expire(*, reservation_id: int, now: datetime | None = None) -> bool:
    res = Reservation.objects.select_related("workload").get(id=reservation_id)
    n = moves.reservation_expire(
        pk=reservation_id,
        fields={"ended_at": now or runtime.now(), "end_reason": "not acknowledged by a destination before it expired"},
        note=Note(
            action="reservation.expired",
            workload=res.workload,
            message="the reservation expired before any destination acknowledged the job",
        ),
    )
    if n:
        _recheck_alert(tenant_id=res.tenant_id, gpu_class_id=res.gpu_class_id)
    return bool(n)


@transaction.atomic
def quota_set(
    *,
    actor: User,
    tenant_id: int,
    gpu_class_id: int,
    limit_gpus: int,
    borrow_limit_gpus: int | None = None,
    owner: User | None = None,
) -> Quota:
    """Admins edit quotas; a limit below what is reserved and running is refused."""
    now = runtime.now()
    quota, _ = Quota.objects.get_or_create(tenant_id=tenant_id, gpu_class_id=gpu_class_id, defaults={"limit_gpus": 0})
    Quota.objects.filter(id=quota.id).update(updated_at=now)  # lock, as in reservation_create
    quota = Quota.objects.select_for_update().get(id=quota.id)
    used = gpus_in_use(tenant_id=tenant_id, gpu_class_id=gpu_class_id)
    borrow = quota.borrow_limit_gpus if borrow_limit_gpus is None else borrow_limit_gpus
    if limit_gpus < 0 or borrow < 0:
        raise ValueError("limit_gpus: must not be negative")
    if limit_gpus + borrow < used:
        raise QuotaBelowUse(used=used, requested=limit_gpus + borrow)
    old = (quota.limit_gpus, quota.borrow_limit_gpus, quota.owner_id)
    quota.limit_gpus, quota.borrow_limit_gpus = limit_gpus, borrow
    if owner is not None:
        quota.owner = owner
    quota.save()
    audit(
        action="quota.changed",
        tenant_id=tenant_id,
        actor=actor,
        message=f"{quota.gpu_class.slug}: {old[0]}+{old[1]} -> {limit_gpus}+{borrow} GPUs",
        inputs={"used": used, "owner": getattr(quota.owner, "username", "")},
    )
    return quota


class QuotaBelowUse(DomainError, ValueError):
    field = "limit_gpus"

    def __init__(self, *, used: int, requested: int):
        self.used, self.requested = used, requested
        super().__init__(f"{requested} GPUs is below the {used} GPUs already reserved or running")
