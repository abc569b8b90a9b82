"""Work the broker does not see: a share of the trace submitted by local users straight into
one cluster's own queue (Slurm's ``sbatch``, a Job in a Kueue LocalQueue), under tenants of
their own.  Every policy meets the same local jobs at the same instants on the same clusters,
so a broker's inventory goes stale between its syncs as it does in production, and a policy
that wins by pushing the local queues back shows it in the local jobs' own waits.

Which jobs are local, and where each goes, depends only on the seed and the job: the mark is
drawn per job (``mark_local``), and the home cluster among those that could ever run it,
weighted by their GPUs of its class (``home_of``), with a generator seeded by the seed and the
job's key, so no policy's own random choices can move it.  The harness submits them
(``inject``); no strategy is told of them.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import replace

from broker.backends.base import ProjectIdentity, Rejected
from broker.replay.jobs import ReplayJob
from broker.replay.simview import FleetView, spec_for
from broker.replay.tracker import Outcome, Start, Tracker

DEFAULT_LOCAL_SHARE = 0.3
LOCAL_PREFIX = "local-"


def mark_local(jobs: Sequence[ReplayJob], share: float, seed: int) -> list[ReplayJob]:
    """The jobs with about ``share`` of them marked local (per job, by seed and key)."""
    if not 0.0 <= share < 1.0:
        raise ValueError(f"local_share: from 0 up to (not including) 1, got {share}")
    return [replace(j, local=draw(seed, "mark", j.key) < share) for j in jobs]


def home_of(view: FleetView, job: ReplayJob, seed: int) -> str | None:
    """The cluster whose local user submits ``job``: one that could ever run it, drawn
    in proportion to its GPUs of the job's class (None: no cluster could)."""
    names = view.eligible(job)
    if not names:
        return None
    weights = [max(1, view.summed_capacity(n, job)) for n in names]
    pick = draw(seed, "home", job.key) * sum(weights)
    for name, weight in zip(names, weights, strict=True):
        if pick < weight:
            return name
        pick -= weight
    return names[-1]


def identity_for_local(tenant: str) -> ProjectIdentity:
    account = f"{LOCAL_PREFIX}{tenant}"
    return ProjectIdentity(tenant=account, project=account, slurm_account=account, k8s_namespace=account)


def inject(view: FleetView, tracker: Tracker, job: ReplayJob, seed: int, now: float) -> Start | None:
    """Submit a local job at its home cluster; its Start when it runs at once (the harness
    accepts it: no strategy hears of it)."""
    outcome = tracker.arrived(job)
    home = home_of(view, job, seed)
    if home is None:
        return None
    try:
        job_id = view.clusters[home].submit(
            spec_for(job), None, identity_for_local(job.tenant), duration_s=job.duration_s
        )
    except Rejected:
        outcome.rejected += 1
        return None
    tracker.local_jobs.add((home, job_id))
    return tracker.dispatched(job.key, home, job_id, now)


def draw(seed: int, what: str, key: str) -> float:
    return random.Random(f"{seed}:{what}:{key}").random()


def local_figures(outcomes: Iterable[Outcome]) -> dict[str, int]:
    """The local users' jobs in whole seconds, for the report's extra counters: how many,
    how many started, their mean and p95 wait (a policy must not win by pushing them)."""
    local = [o for o in outcomes if o.job.local]
    if not local:
        return {}
    waits = sorted(o.wait_s for o in local if o.wait_s is not None)
    p95 = waits[max(1, math.ceil(0.95 * len(waits))) - 1] if waits else 0.0
    return {
        "local jobs": len(local),
        "local started": len(waits),
        "local mean wait s": round(sum(waits) / len(waits)) if waits else 0,
        "local p95 wait s": round(p95),
    }
