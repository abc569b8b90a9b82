"""With the workers stopped, pages say that new submissions wait."""
from __future__ import annotations

from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from broker.models import ReconcileRun


def test_pages_say_submissions_wait_while_background_work_is_stopped(trio, login):
    client = login(trio.member)
    now = timezone.now()
    ReconcileRun.objects.create(started_at=now, finished_at=now)
    assert "background-paused" not in client.get(reverse("workload-list")).content.decode()
    ReconcileRun.objects.update(finished_at=now - timedelta(hours=1))
    body = client.get(reverse("workload-list")).content.decode()
    assert 'id="background-paused"' in body and "new submissions wait here" in body
