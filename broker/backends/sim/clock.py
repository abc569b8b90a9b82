"""The simulator's clock: one per fleet, shared by all its clusters.

Simulated time is a float of seconds since ``origin`` (a real, timezone-aware
datetime), so every timestamp the simulator reports is an ordinary datetime the
broker can store and compare.  Two modes:

* manual (tests, trace replay): time moves only on ``advance``/``advance_to``;
* wall (the demo): time follows the real clock, and job durations are divided by
  ``time_scale`` so that a 60-minute limit runs out in seconds while every
  timestamp stays close to the real ``now``, which keeps the broker's freshness
  checks meaningful.
"""
from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone


class SimClock:
    def __init__(self, origin: datetime | None = None, *, follow_wall: bool = False,
                 time_scale: float = 1.0):
        if time_scale <= 0:
            raise ValueError("time_scale must be positive")
        if origin is None:
            origin = datetime.now(timezone.utc).replace(microsecond=0)
        elif origin.tzinfo is None:
            # naive datetimes would not compare with the broker's aware ones
            origin = origin.replace(tzinfo=timezone.utc)
        self.origin = origin
        self.follow_wall = follow_wall
        self.time_scale = float(time_scale)
        self._offset = 0.0
        self._wall_start = time.monotonic()
        self._lock = threading.Lock()

    @property
    def seconds(self) -> float:
        """Simulated seconds since ``origin``."""
        with self._lock:
            return self._seconds_locked()

    def _seconds_locked(self) -> float:
        if self.follow_wall:
            return self._offset + (time.monotonic() - self._wall_start)
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

    def scaled(self, duration_s: float) -> float:
        """A job's nominal duration as it runs on this clock."""
        return duration_s / self.time_scale

    def __repr__(self) -> str:
        mode = f"wall x{self.time_scale:g}" if self.follow_wall else "manual"
        return f"<SimClock {mode} t={self.seconds:.1f}s origin={self.origin.isoformat()}>"
