"""A restarted demo numbers its simulated jobs after those its database already holds.

The simulated clusters live in the demo's process: a restart builds them again, empty, and
each would number its jobs from 1000 again, so the first dispatch after a restart would be
given a job id the database already records for another workload (the unique pair of cluster
and destination job id refuses it, and the workload stays dispatching)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from django.db.models import Q

from broker.backends.sim import SimulatorFleet
from broker.models import DispatchAttempt, Workload

FIRST = 1000  # where a simulated cluster starts numbering
_NUMBER = re.compile(r"(\d+)$")  # slurm: "1234"; kubernetes: "namespace/name-1234"


def highest_numbers() -> dict[str, int]:
    """Cluster name -> the highest job number recorded for it (workloads and attempts)."""
    found: dict[str, int] = {}
    rows: Iterable[tuple[str | None, str]] = [
        *Workload.objects.exclude(Q(destination_job_id="") | Q(cluster__isnull=True)).values_list(
            "cluster__name", "destination_job_id"
        ),
        *DispatchAttempt.objects.exclude(destination_job_id="").values_list("cluster__name", "destination_job_id"),
    ]
    for cluster, job_id in rows:
        match = _NUMBER.search(job_id)
        if cluster and match:
            found[cluster] = max(found.get(cluster, 0), int(match.group(1)))
    return found


def continue_numbering(fleet: SimulatorFleet) -> dict[str, int]:
    """Each simulated cluster numbers its next job after the highest its database holds;
    returns where each one starts."""
    highest = highest_numbers()
    starts = {}
    for name in fleet.names():
        starts[name] = max(FIRST, highest.get(name, 0) + 1)
        fleet.get(name).number_jobs_from(starts[name])
    return starts
