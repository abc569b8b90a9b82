"""Plain helpers of the accounting tests (fixtures live in conftest.py)."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from broker.backends.base import UsageRecord

FIXTURES = Path(__file__).parent / "fixtures"
T0 = datetime(2026, 11, 3, 9, 0, tzinfo=timezone.utc)


def usage(job_id: str, *, cluster: str = "hpc", account: str = "lattice", gpus: int = 2,
          start: datetime = T0, seconds: int | None = 3600, source: str = "slurm",
          workload_id: str | None = None, gpu_model: str = "a100", gpu_seconds: int | None = None) -> UsageRecord:
    """One job; ``seconds`` None: still running (60 s so far)."""
    end = None if seconds is None else start + timedelta(seconds=seconds)
    secs = gpus * (60 if seconds is None else seconds) if gpu_seconds is None else gpu_seconds
    return UsageRecord(source=source, cluster=cluster, job_id=job_id, workload_id=workload_id, account=account,
                       gpu_model=gpu_model, gpus=gpus, start=start, end=end, gpu_seconds=secs,
                       state="RUNNING" if seconds is None else "COMPLETED")
