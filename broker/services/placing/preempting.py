"""Preemption where the broker owns it (the policy's ``preemption``, ``broker.placement.preemption``).

Each pass looks at the workloads waiting for capacity longer than the policy's ``after_s``
(at the broker, or in the local queue of a cluster the broker sent them to), highest
priority first, oldest first.  Where room may be made: for one waiting at the broker, each
cluster whose preemption the broker owns and that its last placement found full (a
capacity rule, not policy, hardware or residency); for one queued at a cluster the broker
owns, that cluster, whose own scheduler then starts it by its priority.  Room is made when
the running work there that it may preempt (placed by the broker, of its GPU class, at a
lower and preemptible priority; at its own priority too when its tenant reclaims its
guaranteed minimum share of the class from tenants above theirs) would, with the cluster's
idle GPUs of the class, fit the whole job.  Each victim's job is cancelled at the cluster
first; only once the cluster confirms is the victim moved back to placement (its
reservation released, ``preemptions`` counted, the audit naming both workloads, its owner
told).  A cancel that is not confirmed leaves the victim running and is tried again on the
next pass.  Then the cluster's inventory is read again and the waiting workload placed (a
queued one is left to its scheduler), before its victims are placed again (elsewhere, or
to wait).

GPU counts stand for room: the broker does not know which nodes a victim's workers hold, so
a gang that needs whole nodes may find the freed GPUs split; it then waits for the next
pass like any job, and its victims are not preempted again for it (they run elsewhere or
wait behind it, by priority).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F

from broker import runtime
from broker.lifecycle import WorkloadState
from broker.models import Cluster, GpuClass, GpuPool, Workload
from broker.models.workload import LocalReason, WorkloadOrigin
from broker.placement.preemption import Preemption, Running, rank, victims
from broker.placement.record import PlacementRecord
from broker.placement.results import CAPACITY_RULES
from broker.services.fleet.inventory import cluster_sync_inventory
from broker.services.fleet.policy import current_policy
from broker.services.notifying.deliveries import notify_on_commit
from broker.services.placing.cycle import workload_place
from broker.selectors.capacity import promised_gpus
from broker.services.placing.fleet_view import fleet_snapshots, identity_scopes
from broker.services.placing.withdraw import cancelled_there
from broker.services.quota.reservations import reservation_release
from broker.services.records import moves
from broker.services.records.audit import audit
from broker.services.records.transitions import Note

# one pass preempts for at most this many waiting workloads (each is a cancel per victim)
PER_PASS = 10


def broker_preemption_pass(*, now: datetime | None = None) -> int:
    """Preempt for the waiting workloads the policy lets preempt; how many were placed room."""
    now = now or runtime.now()
    rule = current_policy().policy.preemption
    if not rule.broker_owns_any:
        return 0
    owned = {c.name: c for c in Cluster.objects.filter(enabled=True) if rule.owner(c.name) == "broker"}
    waiting = list(
        Workload.objects.filter(
            state__in=(WorkloadState.WAITING, WorkloadState.QUEUED),
            reason=LocalReason.CAPACITY,
            cancel_requested_at__isnull=True,
            created_at__lte=now - timedelta(seconds=rule.after_s),
            gpu_class__isnull=False,
        ).select_related("gpu_class", "tenant", "cluster")
    )
    waiting.sort(key=lambda w: (-_rank(w), w.created_at, w.id))
    made = 0
    for workload in waiting[:PER_PASS]:
        made += _room_for(workload, owned, rule)
    return made


def _priority(workload: Workload) -> str:
    return str((workload.spec or {}).get("priority", "normal"))


def _rank(workload: Workload) -> int:
    return rank(_priority(workload))


def _candidates(workload: Workload, owned: dict[str, Cluster]) -> list[Cluster]:
    """Where room may be made: for a job queued at a cluster, that cluster; for one waiting
    at the broker, each owned cluster its last placement found full."""
    if workload.state == WorkloadState.QUEUED:
        there = owned.get(workload.cluster.name) if workload.cluster else None
        return [there] if there else []
    record = PlacementRecord.from_json(workload.placement)
    return [
        owned[name]
        for name, exclusion in sorted(record.excluded.items())
        if name in owned and exclusion.rule in CAPACITY_RULES
    ]


def _room_for(workload: Workload, owned: dict[str, Cluster], rule: Preemption) -> int:
    assert workload.gpu_class is not None
    for cluster in _candidates(workload, owned):
        idle, scopes = _room(cluster, workload, workload.gpu_class)
        chosen = victims(
            rule=rule,
            priority=_priority(workload),
            needed_gpus=workload.total_gpus,
            idle_gpus=idle,
            running=_running(cluster, workload.gpu_class, scopes, rule),
            reclaim=_reclaim(workload, workload.gpu_class),
        )
        if not chosen:  # [] fits already (the next pass places it); None: not enough to take
            continue
        preempted = [v.key for v in chosen if _preempt(victim_id=v.key, by=workload, cluster=cluster)]
        if len(preempted) < len(chosen):
            return 0  # a cancel not confirmed: the rest is tried on the next pass
        cluster_sync_inventory(cluster_id=cluster.id)
        if workload.state == WorkloadState.WAITING:  # a queued one starts there by its own scheduler
            workload_place(workload_id=workload.id)
        for victim_id in preempted:
            workload_place(workload_id=victim_id)
        return 1
    return 0


def _room(cluster: Cluster, workload: Workload, gpu_class: GpuClass) -> tuple[int, tuple[str, ...] | None]:
    """The class's free GPUs at the cluster as placement sees them (its last report less what
    the broker has placed there since), or, when a local quota of the workload's queue or
    account leaves less, that quota's headroom and the scopes whose jobs use it (only their
    GPUs come back to it); None: any job's GPUs make room.

    For a job queued there, placement's figure counts the job itself as promised (a poll saw
    it wait there) and stops at 0: the report's free GPUs less what else is promised since,
    with its own GPUs back, is the room it would start in; the quota's headroom likewise."""
    pools = list(GpuPool.objects.filter(cluster=cluster))
    if not pools:
        return 0, None
    [snapshot] = fleet_snapshots({cluster: pools})
    scopes = identity_scopes(workload.project)
    queued = workload.state == WorkloadState.QUEUED
    promised = promised_gpus(cluster_ids=[cluster.id])[cluster.id] if queued else None
    stored = {p.name: p for p in pools}
    free, headroom = 0, None
    for pool in snapshot.pools:
        if pool.gpu_model not in gpu_class.gpu_models or pool.gpu_memory_gb < gpu_class.min_memory_gb:
            continue
        if promised is not None:
            row = stored[pool.name]
            free += row.gpus_allocatable - row.gpus_allocated - promised.pools.get(pool.name, 0)
        else:
            free += pool.gpus_free
        for quota in snapshot.limits.quotas_for(pool.name, scopes):
            if quota.headroom_gpus is not None:
                headroom = quota.headroom_gpus if headroom is None else min(headroom, quota.headroom_gpus)
    if queued:
        free = max(0, free + workload.total_gpus)
        headroom = None if headroom is None else headroom + workload.total_gpus
    if headroom is not None and headroom < free:
        return headroom, scopes
    return free, None


def _running(cluster: Cluster, gpu_class: GpuClass, scopes: tuple[str, ...] | None, rule: Preemption) -> list[Running]:
    rows = list(
        Workload.objects.filter(
            cluster=cluster,
            state=WorkloadState.RUNNING,
            preemptions__lt=rule.max_per_workload,
            origin=WorkloadOrigin.BROKER,
            gpu_class=gpu_class,
            cancel_requested_at__isnull=True,
        ).select_related("project", "tenant")
    )
    if scopes is not None:  # a local quota binds: only the jobs that use it give it back
        rows = [w for w in rows if identity_scopes(w.project) == scopes]
    return [
        Running(
            key=w.id, priority=_priority(w), gpus=w.total_gpus, since=w.started_at or w.created_at, tenant=w.tenant.slug
        )
        for w in rows
    ]


def _reclaim(workload: Workload, gpu_class: GpuClass) -> dict[str, int] | None:
    """When the workload's tenant, the job included, stays within its guaranteed minimum of
    the class (the policy's ``min_share`` of the fleet's GPUs of the class): each other
    tenant's running GPUs of the class above its own guarantee.  Else None: no reclaim."""
    policy = current_policy().policy
    fleet = sum(
        GpuPool.objects.filter(
            cluster__enabled=True, gpu_model__in=gpu_class.gpu_models, gpu_memory_gb__gte=gpu_class.min_memory_gb
        ).values_list("gpus_total", flat=True)
    )
    held: dict[str, int] = {}
    for tenant, gpus in Workload.objects.filter(
        state=WorkloadState.RUNNING, gpu_class=gpu_class, origin=WorkloadOrigin.BROKER
    ).values_list("tenant__slug", "total_gpus"):
        held[tenant] = held.get(tenant, 0) + gpus

    def guaranteed(tenant: str) -> int:
        return int(policy.tenant(tenant).min_share * fleet)

    mine = workload.tenant.slug
    if not fleet or held.get(mine, 0) + workload.total_gpus > guaranteed(mine):
        return None
    return {t: n - guaranteed(t) for t, n in held.items() if t != mine and n > guaranteed(t)}


def _preempt(*, victim_id: int, by: Workload, cluster: Cluster) -> bool:
    """Cancel the victim's job at the cluster; once confirmed, back to placement."""
    if not Workload.objects.filter(id=victim_id, cluster=cluster).exists():
        return False  # moved since it was chosen
    victim, confirmed = cancelled_there(
        workload_id=victim_id,
        retrying="preempt.retrying",
        message=lambda w, why: f"to be preempted for {by.name} ({by.uid}); {why}: it runs on",
        state=WorkloadState.RUNNING,
    )
    return confirmed and _preempted(victim, by, cluster)


@transaction.atomic
def _preempted(victim: Workload, by: Workload, cluster: Cluster) -> bool:
    message = (
        f"preempted by the broker at {cluster.name} for {by.name} ({by.uid}, priority {_priority(by)} "
        f"over {_priority(victim)}): placed again"
    )
    both = {"preempted": victim.uid, "for": by.uid, "priorities": [_priority(victim), _priority(by)]}
    moved = moves.preempt_by_broker(
        pk=victim.id,
        fields={
            "preemptions": F("preemptions") + 1,
            "reason": LocalReason.CAPACITY,
            "raw_reason": message,
            "destination_job_id": "",
            "dispatched_at": None,
        },
        then=lambda: reservation_release(workload=victim, reason=message),
        note=Note(
            action="workload.preempted",
            workload=victim,
            cluster=cluster.name,
            destination_job_id=victim.destination_job_id,
            message=message,
            inputs=both,
        ),
    )
    if moved:
        audit(
            action="preemption.made",
            workload=by,
            cluster=cluster.name,
            message=f"preempted {victim.name} ({victim.uid}, priority {_priority(victim)}) at {cluster.name}",
            inputs=both,
        )
        notify_on_commit(workload_id=victim.id, event="preempted")
    return bool(moved)
