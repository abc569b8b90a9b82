"""Fault injection: crash points as hooks, a Backend decorator that fails at them, the
invariant counters, and the harness that drives workloads through them.

    from broker.faults import HarnessConfig, run_harness
    report = run_harness(HarnessConfig(workloads=40, faults=60, seed=1))
    print(report.table())

See docs/reliability.md and ``manage.py fault_harness --help``.
"""

from broker.faults.points import CRASH_POINTS, POINTS_BY_NAME, Crash, CrashPoint, FaultPlan, FaultyBackend

__all__ = [
    "CRASH_POINTS",
    "POINTS_BY_NAME",
    "Crash",
    "CrashPoint",
    "FaultPlan",
    "FaultyBackend",
    "HarnessConfig",
    "HarnessReport",
    "run_harness",
]


def __getattr__(name: str):
    if name in ("HarnessConfig", "HarnessReport", "run_harness"):
        from broker.faults import harness

        return getattr(harness, name)
    raise AttributeError(name)
