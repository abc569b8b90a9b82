"""The impact replay as a background task (thin: one service call)."""

from __future__ import annotations

from celery import shared_task

from broker.policyrelease.services.impact import IMPACT_TIMEOUT_S
from broker.policyrelease.services.impact import impact_run


@shared_task(acks_late=True, time_limit=IMPACT_TIMEOUT_S + 60, soft_time_limit=IMPACT_TIMEOUT_S + 30)
def run_impact(impact_id: int) -> None:

    impact_run(impact_id=impact_id)
