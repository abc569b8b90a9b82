"""How long runs last: one workload's run so far (the pages, the outcome) and a project's
runs of a GPU class lately, placement's run-time estimate (the time limit when there is too
little history)."""

from __future__ import annotations

from statistics import median

from broker import runtime
from broker.models import Workload, WorkloadState


def runtime_hours_for(*, project_id: int, gpu_class_id: int | None) -> float | None:
    runs = list(
        Workload.objects.filter(
            project_id=project_id,
            gpu_class_id=gpu_class_id,
            state=WorkloadState.COMPLETED,
            started_at__isnull=False,
            ended_at__isnull=False,
        )
        .order_by("-ended_at")
        .values_list("started_at", "ended_at", "run_seconds")[:20]
    )
    if len(runs) < 3:
        return None  # too little history: the time limit is the honest estimate
    # the run time the cluster reported: a time-compressed simulation's wall span is 1/120 of it
    spans = [
        ran if ran is not None else (end - start).total_seconds()
        for start, end, ran in runs
        if start is not None and end is not None
    ]  # (filtered above)
    return median(spans) / 3600


def run_seconds_of(workload: Workload) -> float | None:
    """How long a started workload ran (so far): the cluster's own figure when it gave one."""
    if workload.run_seconds is not None:
        return workload.run_seconds
    if workload.started_at is None:
        return None
    return max(0.0, ((workload.ended_at or runtime.now()) - workload.started_at).total_seconds())
