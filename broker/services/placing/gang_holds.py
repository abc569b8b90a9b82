"""Gang holds (the starvation guard): a big gang that has waited past the policy's limit
gets the pool closest to fitting it drained for it, so a stream of small jobs cannot delay
it forever.  A held pool looks full to every other workload until the gang starts (its
placement releases the hold) or stops waiting (the next pass drops the hold)."""

from __future__ import annotations

from datetime import datetime

from broker.spec import WorkloadSpec
from broker.lifecycle import PLACEABLE_STATES
from broker.models import GpuPool, Workload
from broker.placement import PreparedFleet
from broker.placement.fairness import hold_target
from broker.services.records.audit import audit


def apply_holds(fleet: PreparedFleet, *, clear_stale: bool = True) -> None:
    """Pools held for a waiting big gang look full to everyone else; a hold whose gang is
    no longer waiting is dropped here (``clear_stale``; a preview only skips it)."""
    held = list(GpuPool.objects.exclude(held_for="").select_related("cluster"))
    if not held:
        return
    # only the holders are looked up: the waiting queue may be long, the holds are few
    waiting = set(
        Workload.objects.filter(uid__in={p.held_for for p in held}, state__in=PLACEABLE_STATES).values_list(
            "uid", flat=True
        )
    )
    for pool in held:
        if pool.held_for not in waiting:
            if clear_stale:
                GpuPool.objects.filter(id=pool.id, held_for=pool.held_for).update(held_for="")
            continue
        try:
            fleet.hold(pool.cluster.name, pool.name, pool.held_for)
        except KeyError:
            continue  # the pool is not in this pass (stale or rejected cluster)


def hold_for_gang(workload: Workload, fleet: PreparedFleet, spec: WorkloadSpec, now: datetime) -> None:
    """Hold the pool closest to fitting ``workload``'s gang for it (once per gang)."""
    if GpuPool.objects.filter(held_for=workload.uid).exists():
        return
    target = hold_target(fleet, spec, workload.tenant.slug, now)
    if target is None:
        return
    cluster, pool = target
    if GpuPool.objects.filter(cluster__name=cluster, name=pool, held_for="").update(held_for=workload.uid):
        fleet.hold(cluster, pool, workload.uid)  # the rest of the pass sees it held
        audit(
            action="placement.hold",
            workload=workload,
            cluster=cluster,
            message=f"pool {pool} drains for this gang: no new work is placed there until it starts",
        )


def release_holds(*, workload_uid: str) -> None:
    """The gang is placed: its pool takes other work again."""
    GpuPool.objects.filter(held_for=workload_uid).update(held_for="")
