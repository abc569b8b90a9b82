"""Celery task of the metrics app: thin, calls one service."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings
from portal.metrics.services.sampling import fleet_sample_take


@shared_task(
    acks_late=True,
    time_limit=settings.CELERY_TASK_TIME_LIMIT,
    soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT,
)
def sample_fleet() -> None:

    fleet_sample_take()
