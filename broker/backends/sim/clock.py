"""The simulator's clock: one per fleet, shared by all its clusters.

Simulated time is a float of seconds since ``origin`` (a real, timezone-aware
datetime), so every timestamp the simulator reports is an ordinary datetime the
broker can store and compare.  Two modes:

* manual (tests, trace replay): time moves only on ``advance``/``advance_to``;
* wall (the demo): time *is* the broker's clock (``broker.runtime.now()``, what the
  services stamp ``created_at`` with; a test moves both with ``runtime.override``),
  plus whatever ``advance`` added, so nothing the
  simulator reports can precede what the broker recorded before asking it.  Job
  durations are divided by ``time_scale`` so that a 60-minute limit runs out in
  seconds, and ``run_time`` turns such a compressed span back into the simulated
  run time the cluster reports (a 60-minute job reports 60 minutes), which is what
  usage and cost are counted in.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

from broker import runtime


class SimClock:
    def __init__(self, origin: datetime | None = None, *, follow_wall: bool = False, time_scale: float = 1.0):
        if time_scale <= 0:
            raise ValueError("time_scale must be positive")
        if origin is None:
            origin = runtime.now()
            if not follow_wall:
                origin = origin.replace(microsecond=0)  # round instants read better in tests
        elif origin.tzinfo is None:
            # naive datetimes would not compare with the broker's aware ones
            origin = origin.replace(tzinfo=timezone.utc)
        self.origin = origin
        self.follow_wall = follow_wall
        self.time_scale = float(time_scale)
        self._offset = 0.0
        self._wall_origin = origin.timestamp()
        self._last = 0.0
        self._lock = threading.Lock()

    @property
    def seconds(self) -> float:
        """Simulated seconds since ``origin``."""
        with self._lock:
            return self._seconds_locked()

    def _seconds_locked(self) -> float:
        if self.follow_wall:
            # the broker's clock itself, not a monotonic count from a rounded origin: that one
            # ran up to a second behind the broker, so jobs "started" before they were created
            self._last = max(self._last, self._offset + (runtime.now().timestamp() - self._wall_origin))
            return self._last  # never backwards, even when the wall clock is stepped back
        return self._offset

    def now(self) -> datetime:
        return self.at(self.seconds)

    def at(self, seconds: float) -> datetime:
        """The datetime of a simulated instant."""
        return self.origin + timedelta(seconds=seconds)

    def to_seconds(self, when: datetime) -> float:
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        return (when - self.origin).total_seconds()

    def advance(self, seconds: float) -> float:
        """Move time forward (also in wall mode: fast-forwards the demo)."""
        if seconds < 0:
            raise ValueError("the simulated clock never goes back")
        with self._lock:
            self._offset += seconds
            return self._seconds_locked()

    def advance_to(self, seconds: float) -> float:
        """Move to an absolute instant (trace replay); earlier instants are ignored."""
        with self._lock:
            now = self._seconds_locked()
            if seconds > now:
                self._offset += seconds - now
            return self._seconds_locked()

    @property
    def lead_s(self) -> float:
        """How far a wall-following clock runs ahead of the broker's clock (what ``advance``
        added); 0 for a manual clock, which keeps no relation to wall time."""
        if not self.follow_wall:
            return 0.0
        with self._lock:
            return self._seconds_locked() - (runtime.now().timestamp() - self._wall_origin)

    def scaled(self, duration_s: float) -> float:
        """A job's nominal duration as it runs on this clock."""
        return duration_s / self.time_scale

    def run_time(self, clock_s: float) -> float:
        """The simulated run time a span of this clock stands for (``scaled``'s inverse):
        what the cluster reports as the job's elapsed time."""
        return clock_s * self.time_scale

    def __repr__(self) -> str:
        mode = f"wall x{self.time_scale:g}" if self.follow_wall else "manual"
        return f"<SimClock {mode} t={self.seconds:.1f}s origin={self.origin.isoformat()}>"
