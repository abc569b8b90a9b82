"""How good the learned queue-wait estimates were: the wait predicted at each workload's
first placement decision (``PlacementRecord.predicted_wait_s``) against the wait it had
(start - submission), over workloads that started."""

from __future__ import annotations

from datetime import datetime

from django.db.models import QuerySet

from broker.models import Workload
from broker.placement.record import PlacementRecord
from broker.placement.wait_estimator import EstimatorReport, estimator_report


def prediction_rows(
    workloads: QuerySet[Workload], *, since: datetime | None = None
) -> list[tuple[str, str, float, float]]:
    """(cluster, pool, predicted, actual) of every started workload with a prediction."""
    rows = workloads.filter(started_at__isnull=False)
    if since is not None:
        rows = rows.filter(started_at__gte=since)
    out = []
    values = rows.values_list("cluster__name", "placement", "created_at", "started_at")
    for cluster, placement, created, started in values.iterator():
        record = PlacementRecord.from_json(placement)
        if record.predicted_wait_s is not None and started is not None:
            pool = record.chosen.pool if record.chosen else ""
            actual = max(0.0, (started - created).total_seconds())
            out.append((cluster or "", pool, float(record.predicted_wait_s), actual))
    return out


def wait_estimate_report(workloads: QuerySet[Workload], *, since: datetime | None = None) -> EstimatorReport | None:
    """Mean and p50/p90 of |predicted - actual| wait, overall and per cluster x pool; None
    before any prediction started."""
    return estimator_report(prediction_rows(workloads, since=since))
