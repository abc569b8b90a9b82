"""Celery task of the metrics app: thin, calls one service."""

from __future__ import annotations

from celery import shared_task


@shared_task(acks_late=True)
def sample_fleet() -> None:
    from portal.metrics.services.sampling import fleet_sample_take

    fleet_sample_take()
