"""Celery task of the metrics app (thin, calls one service), and the count of task failures."""

from __future__ import annotations

import logging

from celery import shared_task
from celery.signals import task_failure
from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from portal.metrics.services.sampling import fleet_sample_take
from portal.metrics.services.task_failures import task_failure_count

log = logging.getLogger(__name__)


@shared_task(
    acks_late=True,
    time_limit=settings.CELERY_TASK_TIME_LIMIT,
    soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT,
)
def sample_fleet() -> None:

    fleet_sample_take()


@task_failure.connect(dispatch_uid="gpubroker-count-task-failures")
def count_task_failure(sender: object = None, **_: object) -> None:
    """Every task that raised (its soft time limit included) counts one failure of its name,
    for ``gpubroker_celery_task_failures_total``.  A metric, not business logic, which is why
    a signal is the right hook.  A database that cannot take the count (the failure was a
    lost connection) costs the count, logged, never a second error in the worker."""
    task = str(getattr(sender, "name", None) or "unknown")
    try:
        task_failure_count(task=task, now=timezone.now())
    except DatabaseError:
        log.warning("could not count a failure of %s", task, exc_info=True)
