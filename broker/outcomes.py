"""How a workload ended, for the pages and the API: what the status poll stored from the
backend's outcome, plus the run time and GPU-hours the broker knows itself."""

from __future__ import annotations

from typing import Any

from broker.models import Workload, WorkloadState
from broker.placement.record import PlacementRecord
from broker.selectors.run_times import run_seconds_of

# What an ended workload says when its backend could not tell more (or never ran it).
_FALLBACK = {
    WorkloadState.COMPLETED: "completed",
    WorkloadState.FAILED: "failed; the cluster gave no reason",
    WorkloadState.CANCELLED: "cancelled",
    WorkloadState.REJECTED: "rejected before it ran",
}


def workload_outcome(workload: Workload) -> dict[str, Any] | None:
    """None until the workload has ended; then summary, end_reason, exit_code, signal,
    worker, detail, run_seconds and gpu_hours."""
    if not workload.is_terminal:
        return None
    stored = workload.outcome or {}
    run_s = run_seconds_of(workload)
    return {
        "summary": stored.get("summary") or _FALLBACK.get(WorkloadState(workload.state), workload.state),
        "end_reason": stored.get("end_reason", ""),
        "exit_code": stored.get("exit_code"),
        "signal": stored.get("signal"),
        "worker": stored.get("worker", ""),
        "detail": stored.get("detail", ""),
        "run_seconds": None if run_s is None else round(run_s, 1),
        "gpu_hours": None if run_s is None else round(run_s * charged_gpus(workload) / 3600, 4),
    }


def charged_gpus(workload: Workload) -> float:
    """The GPUs a workload is charged for: its GPUs, or for a job of GPU shares the share of a
    GPU its units are in the pool it was placed on (4 shares of a pool of 8 per GPU: 0.5)."""
    chosen = PlacementRecord.from_json(workload.placement).chosen
    return workload.total_gpus / (chosen.units_per_gpu if chosen else 1)
