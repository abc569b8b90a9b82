"""Count a Celery task's failure where the web process's scrape can read it (the database)."""

from __future__ import annotations

from datetime import datetime

from django.db.models import F

from portal.metrics.models import TaskFailureCount


def task_failure_count(*, task: str, now: datetime) -> None:
    """One more failure of ``task``.  The increment is done by the database (``F + 1``), so
    two workers failing at once both count; the row is made on the task's first failure."""
    row, _ = TaskFailureCount.objects.get_or_create(task=task)
    TaskFailureCount.objects.filter(pk=row.pk).update(failures=F("failures") + 1, last_failed_at=now)
