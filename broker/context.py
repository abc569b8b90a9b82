"""Tell every page when the broker's background work has stopped (outage contract)."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest

from broker.models import ReconcileRun
from broker import runtime


def background_status(request: HttpRequest) -> dict[str, object]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    last = ReconcileRun.objects.only("finished_at").first()
    if last is None:
        return {}  # a new installation: nothing has run yet, nothing is late
    lag = (runtime.now() - last.finished_at).total_seconds()
    limit = 2 * settings.GPUBROKER_RECONCILE_INTERVAL_S + 30
    return {"background_paused": lag > limit, "background_lag_s": int(lag)}
