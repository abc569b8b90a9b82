"""The demo's simulated fleet across restarts.

``manage.py demo`` builds the fleet from the fleet file, takes each cluster's saved state up
again (demo/services.py), numbers new jobs after every one its database records
(demo/job_numbers.py), and only then starts the ticker, so nothing is dispatched, polled or
reconciled against an empty cluster.  The ticker saves the state every ``SAVE_EVERY_S`` and
the command once more when it stops, so a restart loses at most the last few seconds of what
a killed process did (a job submitted in them is then escalated as lost, not cancelled).

Time while the demo is down: simulated jobs keep running in wall time.  The clock comes back
with its lead over wall time, so a job whose end passed while the demo was stopped has
ended, at the instant it would have, when the demo is back (broker/backends/sim/snapshot.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from django.conf import settings

from broker.backends.sim import SimClock, SimulatorFleet
from broker.fleet_file import build_simulated_clusters, load_fleet
from demo.job_numbers import continue_numbering
from demo.services import Restored, simulated_clusters_restore

SAVE_EVERY_S = 10.0  # as often as the status poll (its default): what the broker saw is saved soon after
SAVE_TASK = "demo.services.simulated_clusters_save"


@dataclass
class FleetStart:
    fleet: SimulatorFleet
    restored: Restored
    numbering: dict[str, int]  # cluster -> the number its next job gets


def fleet_start(*, fleet_file: Path, time_scale: float) -> FleetStart:
    """Build the process's simulated fleet as the demo runs it, with its saved state taken up."""
    fleet = SimulatorFleet.reset(clock=SimClock(follow_wall=True, time_scale=time_scale))
    build_simulated_clusters(load_fleet(fleet_file), fleet)
    restored = simulated_clusters_restore(fleet=fleet)
    return FleetStart(fleet=fleet, restored=restored, numbering=continue_numbering(fleet))


def demo_schedule() -> dict[str, Mapping[str, Any]]:
    """The beat schedule the demo's ticker runs: the broker's, and the save of the fleet's state."""
    return {**settings.CELERY_BEAT_SCHEDULE, "save-simulated-clusters": {"task": SAVE_TASK, "schedule": SAVE_EVERY_S}}
