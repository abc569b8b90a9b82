"""Celery tasks of accounting: thin and id-based; each calls one service.

``collect_all_usage`` runs from CELERY_BEAT_SCHEDULE in settings.py (the one schedule).
"""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from broker.models import Cluster
from accounting.services.budgets import budget_check
from accounting.services.cloud_tco import cloud_tco_check
from accounting.services.usage import usage_collect
from accounting.periods import parse_month
from accounting.services.reconciliation import reconciliation_run_all

# a usage read can be long (a month of sacct on a big cluster): more time than the broker's
# tasks, set by GPUBROKER_USAGE_TASK_TIME_LIMIT_S
TASK_OPTIONS = {
    "acks_late": True,
    "time_limit": settings.GPUBROKER_USAGE_TASK_TIME_LIMIT_S,
    "soft_time_limit": settings.GPUBROKER_USAGE_TASK_SOFT_TIME_LIMIT_S,
}


@shared_task(**TASK_OPTIONS)
def collect_usage(cluster_id: int) -> None:

    usage_collect(cluster_id=cluster_id)


@shared_task(**TASK_OPTIONS)
def collect_all_usage() -> None:
    for cluster_id in Cluster.objects.filter(enabled=True).values_list("id", flat=True):
        collect_usage.delay(cluster_id)


@shared_task(**TASK_OPTIONS)
def reconcile_month(period: str) -> None:
    """``period`` as YYYY-MM; rerunning replaces the month's answer."""

    reconciliation_run_all(period=parse_month(period))


@shared_task(**TASK_OPTIONS)
def check_cloud_tco() -> None:
    """Tenants' cloud spend this month against on-prem TCO; the first crossing is told."""
    cloud_tco_check()


@shared_task(**TASK_OPTIONS)
def check_budgets() -> None:
    """GPU-hour budgets against the ledger and live work; each threshold is told once a period."""
    budget_check()
