"""Each broker tenant's cloud spend per calendar month of the replay, against its budget.

A job on a cloud cluster costs its GPUs x its run time x the cluster's list price, split
over the calendar months its run spans (the replay's clock starts at ``ORIGIN``), as the
broker's own month-to-date estimate counts it (``portal.metrics.readings.cloud_spend_month``).
Scored from the tracker's starts and the jobs' run times, never from the broker's books."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta

from broker.fleet_file import FleetDescription
from broker.replay.tracker import Outcome
from broker.services.placing.bursting import next_month


def _month_starts(start: datetime, end: datetime) -> list[datetime]:
    """The first instant of every month the span touches after ``start``'s own, and ``end``."""
    edges: list[datetime] = []
    cursor = start
    while True:
        nxt = next_month(cursor)
        if nxt >= end:
            return [*edges, end]
        edges.append(nxt)
        cursor = nxt


def tenant_month_spend(
    outcomes: Iterable[Outcome], fleet: FleetDescription, origin: datetime
) -> dict[tuple[str, str], float]:
    """(tenant, "YYYY-MM") -> cloud spend of the broker's jobs that started."""
    price = {c.name: c.price_per_gpu_hour for c in fleet.clusters if c.location == "cloud"}
    spend: dict[tuple[str, str], float] = defaultdict(float)
    for o in outcomes:
        if o.start_s is None or o.cluster not in price or o.job.local:
            continue
        start = origin + timedelta(seconds=o.start_s)
        end = start + timedelta(seconds=o.job.duration_s)
        cursor = start
        for edge in _month_starts(start, end):
            hours = (edge - cursor).total_seconds() / 3600.0
            spend[(o.job.tenant, cursor.strftime("%Y-%m"))] += o.job.total_gpus * hours * price[o.cluster]
            cursor = edge
    return dict(spend)


def budget_figures(spend: dict[tuple[str, str], float], budget: float | None) -> dict[str, int]:
    """The report's counters: the largest tenant-month spend, and (with a budget) how many
    tenant-months passed it."""
    most = max(spend.values(), default=0.0)
    out = {"max tenant-month cloud spend": round(most)}
    if budget is not None:
        out["cloud budget per tenant-month"] = round(budget)
        out["tenant-months over budget"] = sum(v > budget + 0.005 for v in spend.values())
    return out
