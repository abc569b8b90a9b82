"""The Prometheus collector: every scrape reads the database, so no figure resets on restart.

Counters and histograms are cumulative over the stored history (every started workload,
every failed placement on the audit trail), which is what Prometheus expects of them.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Iterator

from django.utils import timezone
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from portal.metrics import readings
from portal.metrics.celery_queues import broker_queue_depths

# Seconds: from "started at once" to "waited a day"; the last bucket is +Inf.
WAIT_BUCKETS = (10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 21600.0, 86400.0)


class FleetCollector:
    def __init__(self, celery_broker_url: str = "", celery_queues: tuple[str, ...] = ()) -> None:
        self.celery_broker_url = celery_broker_url
        self.celery_queues = celery_queues

    def collect(self) -> Iterator[Metric]:
        now = timezone.now()
        yield self._gpus()
        yield self._queue_depth()
        yield from self._wait_histograms()
        failed = CounterMetricFamily(
            "gpubroker_failed_placements",
            "Placements refused by a destination or rejected by the broker, since the start of the audit trail",
        )
        failed.add_metric([], readings.failed_placements())
        yield failed
        yield from self._lags(now)
        month_spend = readings.cloud_spend_month(now)  # per (tenant, cluster): both figures below
        yield self._cloud_spend(month_spend)
        yield from self._escalations(now)
        yield from self._budgets(month_spend)
        yield from self._cloud_tco(now)
        yield from self._celery()

    def _gpus(self) -> Metric:
        gpus = GaugeMetricFamily(
            "gpubroker_gpus",
            "GPUs per cluster, GPU class and resource by state; "
            "resource 'gpu' is whole GPUs, 'mig-<profile>' counts MIG slices apart, "
            "'shares-<kind>' shares of a GPU (time-slicing or MPS replicas, Slurm shards)",
            labels=["cluster", "location", "gpu_class", "resource", "state"],
        )
        for cell in readings.capacity_cells():
            for state in readings.GPU_STATES:
                gpus.add_metric(
                    [cell.cluster, cell.location, cell.gpu_class, cell.resource, state], getattr(cell, state)
                )
        return gpus

    def _queue_depth(self) -> Metric:
        depth = GaugeMetricFamily(
            "gpubroker_queue_depth", "Workloads not yet running, per GPU class", labels=["gpu_class"]
        )
        for gpu_class, count in sorted(readings.queue_depth_by_class().items()):
            depth.add_metric([gpu_class], count)
        return depth

    def _wait_histograms(self) -> Iterator[Metric]:
        for name, start_field, documentation in (
            ("gpubroker_queue_wait_seconds", "created_at", "From submission to the first GPU, per started workload"),
            (
                "gpubroker_time_to_first_gpu_seconds",
                "dispatched_at",
                "From hand-over to the cluster's scheduler to the first GPU, per started workload",
            ),
        ):
            cumulative, seconds, count = readings.wait_histogram(start_field, WAIT_BUCKETS)
            buckets = [(str(b), c) for b, c in zip(WAIT_BUCKETS, cumulative, strict=True)] + [("+Inf", count)]
            family = HistogramMetricFamily(name, documentation)
            family.add_metric([], buckets=buckets, sum_value=seconds)
            yield family

    def _lags(self, now) -> Iterator[Metric]:
        lag = readings.reconcile_lag_s(now)
        if lag is not None:  # no pass yet: no sample, rather than a made-up zero
            yield GaugeMetricFamily(
                "gpubroker_reconcile_lag_seconds", "Seconds since the last reconciliation pass finished", value=lag
            )
        age = GaugeMetricFamily(
            "gpubroker_inventory_age_seconds", "Seconds since each cluster's last inventory report", labels=["cluster"]
        )
        for cluster, seconds in sorted(readings.inventory_age_s(now).items()):
            if seconds is not None:
                age.add_metric([cluster], seconds)
        yield age

    def _escalations(self, now) -> Iterator[Metric]:
        open_ = GaugeMetricFamily(
            "gpubroker_escalations_open", "Escalations waiting for an admin, per kind", labels=["kind"]
        )
        for kind, count in sorted(readings.open_escalations_by_kind().items()):
            open_.add_metric([kind], count)
        yield open_
        oldest = readings.oldest_open_escalation_s(now)
        yield GaugeMetricFamily(
            "gpubroker_escalation_oldest_open_seconds",
            "Seconds the oldest open escalation has waited for an admin (0: none open)",
            value=round(oldest or 0.0, 1),
        )

    def _budgets(self, month_spend: dict[tuple[int, str], Decimal]) -> Iterator[Metric]:
        spend = GaugeMetricFamily(
            "gpubroker_tenant_cloud_spend_month",
            "Estimated cloud spend of a tenant with a budget, since the first of the month",
            labels=["tenant"],
        )
        budget = GaugeMetricFamily(
            "gpubroker_tenant_cloud_budget_month", "A tenant's monthly cloud budget", labels=["tenant"]
        )
        for tenant, (spent, allowed) in sorted(readings.tenant_cloud_budgets(month_spend).items()):
            spend.add_metric([tenant], float(spent))
            budget.add_metric([tenant], float(allowed))
        yield spend
        yield budget

    def _cloud_tco(self, now) -> Iterator[Metric]:
        share = GaugeMetricFamily(
            "gpubroker_tenant_cloud_tco_share",
            "A tenant's cloud spend this month (egress included, from the ledger) over what the same GPU-hours "
            "cost on-prem at TCO rates, as the last check read it",
            labels=["tenant"],
        )
        crossed = GaugeMetricFamily(
            "gpubroker_tenant_cloud_tco_crossed",
            "1 once a tenant's cloud spend this month passed the policy's share of that TCO (burst.reassess_share)",
            labels=["tenant", "action"],
        )
        for reading in sorted(readings.cloud_tco_readings(now), key=lambda r: r.tenant.slug):
            if reading.share is not None:
                share.add_metric([reading.tenant.slug], round(reading.share, 4))
            crossed.add_metric([reading.tenant.slug, reading.action], 1 if reading.crossed_at else 0)
        yield share
        yield crossed

    def _celery(self) -> Iterator[Metric]:
        depth = GaugeMetricFamily(
            "gpubroker_celery_queue_depth",
            "Tasks waiting in each Celery queue of the Redis broker (none reported without one)",
            labels=["queue"],
        )
        for queue, count in sorted(broker_queue_depths(self.celery_broker_url, self.celery_queues).items()):
            depth.add_metric([queue], count)
        yield depth
        failures = CounterMetricFamily(
            "gpubroker_celery_task_failures",
            "Failures of each Celery task (it raised, or hit its soft time limit), counted in the database",
            labels=["task"],
        )
        for task, count in sorted(readings.task_failures().items()):
            failures.add_metric([task], count)
        yield failures

    def _cloud_spend(self, month_spend: dict[tuple[int, str], Decimal]) -> Metric:
        spend = GaugeMetricFamily(
            "gpubroker_cloud_spend_month",
            "Estimated cloud spend since the first of the month (GPU-hours x list price; bills come later)",
            labels=["cluster"],
        )
        per_cluster: dict[str, float] = {}
        for (_, cluster), amount in month_spend.items():
            per_cluster[cluster] = per_cluster.get(cluster, 0.0) + float(amount)
        for cluster, total in sorted(per_cluster.items()):
            spend.add_metric([cluster], round(total, 2))
        return spend


def exposition(celery_broker_url: str = "", celery_queues: tuple[str, ...] = ()) -> bytes:
    """The scrape body; a private registry, so no process-global counter is ever reported.
    ``celery_broker_url``: where the queues are read (empty: tasks run in-process, no queue)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FleetCollector(celery_broker_url, celery_queues))
    return generate_latest(registry)
