"""Start a real Celery worker process against the test database and Redis."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]


def database_url_for_tests() -> str:
    db = settings.DATABASES["default"]
    if not db["ENGINE"].endswith("postgresql"):
        raise RuntimeError("a worker shares the test database only on PostgreSQL")
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def stop_process(proc: subprocess.Popen | None, grace_s: float = 20) -> None:
    """Terminate, and kill what does not stop within the grace period."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


class WorkerProcess:
    def __init__(self, broker_url: str, log_path: Path):
        self.broker_url, self.log_path = broker_url, log_path
        self.proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 60.0) -> None:
        env = {**os.environ, "DATABASE_URL": database_url_for_tests(), "CELERY_BROKER_URL": self.broker_url,
               "PYTHONPATH": str(ROOT)}
        env["GPUBROKER_SIM_AUTOLOAD"] = "true"  # the worker's fleet: GPUBROKER_FLEET_FILE
        env["GPUBROKER_FLEET_FILE"] = str(settings.GPUBROKER_FLEET_FILE)
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "-l", "info", "--concurrency", "2",
             "--pool", "threads", "-n", f"ci-{os.getpid()}@%h", "--without-gossip", "--without-mingle"],
            cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited: {self.log_path.read_text()[-2000:]}")
            if "ready." in self.log_path.read_text():
                return
            time.sleep(0.3)
        raise RuntimeError(f"worker not ready in {timeout_s}s: {self.log_path.read_text()[-2000:]}")

    def stop(self) -> None:
        stop_process(self.proc)
        self.log.close()

    def kill(self) -> None:
        """Simulate a crash: no chance to finish or acknowledge."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
