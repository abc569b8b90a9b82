"""How good the learned queue-wait estimates were: the wait predicted at each workload's
first placement decision (``PlacementRecord.predicted_wait_s``) against the wait it had
(start - submission), over workloads that started."""

from __future__ import annotations

from datetime import datetime

from django.db.models import QuerySet

from broker.models import Workload
from broker.placement.record import PlacementRecord
from broker.wait_estimator import ErrorSummary, error_summary


def prediction_pairs(workloads: QuerySet[Workload], *, since: datetime | None = None) -> list[tuple[float, float]]:
    rows = workloads.filter(started_at__isnull=False)
    if since is not None:
        rows = rows.filter(started_at__gte=since)
    pairs = []
    for placement, created, started in rows.values_list("placement", "created_at", "started_at").iterator():
        predicted = PlacementRecord.from_json(placement).predicted_wait_s
        if predicted is not None and started is not None:
            pairs.append((float(predicted), max(0.0, (started - created).total_seconds())))
    return pairs


def wait_estimate_error(workloads: QuerySet[Workload], *, since: datetime | None = None) -> ErrorSummary | None:
    """Mean and p50/p90 of |predicted - actual| wait; None before any prediction started."""
    return error_summary(prediction_pairs(workloads, since=since))
