"""How long simulated jobs run.

Trace replay registers each workload's real duration before submitting it; anything
else runs for a fixed fraction of its time limit.  Keyed by workload id, not by cluster,
because the duration is known before the broker has chosen where the job goes.
"""

from __future__ import annotations

import threading

from broker.backends.base import JobState


class Runtimes:
    def __init__(self, default_fraction: float = 0.5, foreign_default_s: float = 3600.0):
        if not 0 < default_fraction:
            raise ValueError("default_fraction must be positive")
        self.default_fraction = default_fraction
        self.foreign_default_s = foreign_default_s
        self._overrides: dict[str, tuple[float, JobState]] = {}
        self._lock = threading.Lock()

    def set(self, workload_id: str, seconds: float, final_state: JobState = JobState.COMPLETED) -> None:
        """Run ``workload_id`` for ``seconds`` (nominal, before the clock's time_scale)."""
        if seconds < 0:
            raise ValueError("a duration cannot be negative")
        if not final_state.ended:
            raise ValueError("final_state must be an ended state")
        with self._lock:
            self._overrides[workload_id] = (float(seconds), final_state)

    def clear(self) -> None:
        with self._lock:
            self._overrides.clear()

    def for_job(self, workload_id: str | None, time_limit_s: float | None) -> tuple[float, JobState]:
        """(nominal seconds, final state) of a new job."""
        with self._lock:
            if workload_id and workload_id in self._overrides:
                return self._overrides[workload_id]
        if time_limit_s is None:
            return self.foreign_default_s, JobState.COMPLETED
        return time_limit_s * self.default_fraction, JobState.COMPLETED
