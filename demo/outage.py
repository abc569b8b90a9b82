"""The demo's outage switch: an operator makes a simulated cluster unreachable and brings
it back, so anyone can watch what an outage does (the cluster goes stale, never idle;
placements avoid it; cancellations wait and retry).

The switch is the fleet simulator's own ``unreachable`` fault.  The simulated fleet lives
in the process that runs the background work, so the switch works only when that is this
process (the demo: tasks in-process); with a separate Celery worker it is refused rather
than flipped where nothing would notice.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db import transaction

from broker.backends.sim import SimulatedCluster, SimulatorFleet
from broker.models import Cluster, ClusterKind
from broker.services.records.audit import audit
from broker.services.records.tasks_bridge import background_in_process
from broker.services.fleet.inventory import cluster_sync_inventory
from portal.tenancy.access import AnyUser, is_operator, signed_in
from portal.tenancy.errors import DomainError


class OutageRefused(DomainError, ValueError):
    """The switch cannot apply to this cluster here; the message says why."""

    status = 409
    code = "refused"


def _simulated(cluster: Cluster) -> SimulatedCluster:
    if cluster.kind != ClusterKind.SIMULATOR:
        raise OutageRefused(
            f"{cluster.name} is a real {cluster.get_kind_display()} cluster: "
            "only simulated clusters have an outage switch"
        )
    if not background_in_process():
        raise OutageRefused(
            "the simulated fleet runs in the Celery worker, not here: "
            "the outage switch works when background work runs in-process (make demo)"
        )
    try:
        return SimulatorFleet.instance().get(cluster.name)
    except KeyError:
        raise OutageRefused(f"{cluster.name} is not running in this process's simulated fleet") from None


def cluster_outage_set(*, actor: AnyUser, cluster_id: int, unreachable: bool) -> Cluster:
    """Cut a simulated cluster off (``unreachable=True``) or reconnect it.  Operators only.

    The broker then learns of it the way it would of a real outage: the inventory sync that
    follows (run at once, so the page shows it) finds no answer and marks the cluster stale."""
    if not is_operator(actor):
        raise PermissionDenied("only platform operators switch simulated outages")
    cluster = Cluster.objects.get(id=cluster_id)
    sim = _simulated(cluster)
    with transaction.atomic():
        if unreachable:
            audit(
                action="cluster.outage_simulated",
                actor=signed_in(actor),
                cluster=cluster.name,
                message=f"{actor.get_username()} made the simulated cluster unreachable",
            )
        else:
            audit(
                action="cluster.outage_ended",
                actor=signed_in(actor),
                cluster=cluster.name,
                message=f"{actor.get_username()} reconnected the simulated cluster",
            )
        # last inside the transaction: whatever fails before it leaves the switch as it was
        sim.set_faults(unreachable=unreachable)
    return cluster_sync_inventory(cluster_id=cluster.id)


def simulated_outages() -> dict[str, bool]:
    """Name -> unreachable for every cluster of this process's simulated fleet (the switch's
    position; in-memory state, so it is read here and not from the database)."""
    if not background_in_process():
        return {}
    fleet = SimulatorFleet.instance()
    return {name: bool(fleet.get(name).faults.unreachable) for name in fleet.names()}
