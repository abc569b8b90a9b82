"""The demo's writes: its simulated clusters' state, saved in its database and taken up again
at start-up (demo/fleet.py says when)."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction

from broker import runtime
from broker.backends.sim import SimulatorFleet
from broker.services.records.audit import audit
from demo.models import SimulatedClusterState
from demo.selectors import followed_workloads_on, simulated_cluster_states


@dataclass
class Restored:
    jobs: dict[str, int] = field(default_factory=dict)  # cluster -> jobs taken up again
    unsaved: dict[str, int] = field(default_factory=dict)  # cluster with no saved state -> workloads followed there
    refused: dict[str, str] = field(default_factory=dict)  # cluster -> why its saved state was not taken up


def simulated_clusters_save(*, fleet: SimulatorFleet | None = None) -> int:
    """Save every cluster of the simulated fleet (this process's by default); returns how many.

    Not audited: a periodic copy of in-memory state (every few seconds, and at shutdown), no
    decision; the restore that uses it is."""
    fleet = fleet or SimulatorFleet.instance()
    # read before the transaction: each cluster's lock is held while it is read, never the database's
    states = [fleet.get(name).to_json() for name in fleet.names()]
    saved_at = runtime.now()
    with transaction.atomic():
        for state in states:
            SimulatedClusterState.objects.update_or_create(
                cluster=state["cluster"], defaults={"state": state, "saved_at": saved_at}
            )
    return len(states)


@transaction.atomic
def simulated_clusters_restore(*, fleet: SimulatorFleet) -> Restored:
    """Take each freshly built cluster's saved state up again; one audit record per cluster.

    A cluster with no saved state (a database from before states were saved) starts empty:
    the broker's status poll then finds its followed jobs missing and escalates each as a
    lost job for an admin, never cancelling or releasing any by itself."""
    saved, restored = simulated_cluster_states(), Restored()
    for name in fleet.names():
        if name not in saved:
            restored.unsaved[name] = followed_workloads_on(name)
            message = f"no saved state: {restored.unsaved[name]} followed workloads will show as lost jobs"
        else:
            try:
                restored.jobs[name] = fleet.get(name).load_json(saved[name])
                message = f"{restored.jobs[name]} simulated jobs taken up again"
            except (ValueError, KeyError, TypeError) as exc:  # a state another version wrote, a changed layout
                restored.refused[name] = f"{type(exc).__name__}: {exc}"
                message = f"saved state not taken up: {restored.refused[name]}"
        audit(action="demo.simulated_cluster_restored", cluster=name, message=message)
    return restored
