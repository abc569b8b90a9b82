"""Keep what a trace replay measured of the wait estimator, for ``/fleet/``.

The replay runs in a throwaway database (its synthetic tenants and thousands of workloads
must not land in the portal's), so what it learned about the estimator is carried out as
plain figures and written here afterwards: one row per broker preset x trace window x
seed, replaced when the same run is made again."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Sequence

from django.contrib.auth.models import User
from django.db import transaction

from broker.models import ReplayEstimate
from broker.services.records.audit import audit
from broker.placement.wait_estimator import EstimatorReport
from broker import runtime


@dataclass(frozen=True)
class ReplayEstimateRun:
    """One preset's replay of one window: where it ran and what its estimator did."""

    trace: str  # the file's name, not its path
    half: str
    time_compress: float
    seed: int
    policy: str
    jobs: int
    report: EstimatorReport


@transaction.atomic
def record_replay_estimates(
    *, runs: Sequence[ReplayEstimateRun], actor: User | None = None, now: datetime | None = None
) -> list[ReplayEstimate]:
    """Store each run's estimator error (replacing an earlier run of the same window, seed,
    policy and number of jobs) and audit what was recorded."""
    now = now or runtime.now()
    stored = [_store(run, now) for run in runs]
    if stored:
        audit(
            action="replay.estimates_recorded",
            actor=actor,
            message=f"{len(stored)} replay run(s): " + "; ".join(str(row) for row in stored),
            inputs={"runs": [row.id for row in stored]},
        )
    return stored


def _store(run: ReplayEstimateRun, now: datetime) -> ReplayEstimate:
    overall = run.report.overall
    row, _ = ReplayEstimate.objects.update_or_create(
        trace=run.trace,
        half=run.half,
        time_compress=run.time_compress,
        seed=run.seed,
        policy=run.policy,
        jobs=run.jobs,  # a --limit run is another run, not a rerun
        defaults={
            "count": overall.count,
            "mean_abs_s": overall.mean_abs_s,
            "p50_abs_s": overall.p50_abs_s,
            "p90_abs_s": overall.p90_abs_s,
            "mean_signed_s": overall.mean_signed_s,
            "by_destination": run.report.to_dict()["by_destination"],
            "recorded_at": now,
        },
    )
    return row
