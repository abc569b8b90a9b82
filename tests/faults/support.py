"""Real processes for the fault tests: a Celery worker with the fault hooks (and the journal
destination), Celery beat, and Redis restarted under them."""
from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings

from tests.support.worker import ROOT, WorkerProcess, database_url_for_tests, stop_process

_names = itertools.count(1)


def wait_for(predicate, timeout_s: float, interval_s: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval_s)
    return bool(predicate())


class FaultWorker(WorkerProcess):
    """``python -m broker.faults.worker``: simulator clusters are journal clusters; with
    ``pause`` the worker stops at that hook (see broker.faults.worker) until told to go on."""

    def __init__(self, broker_url: str, log_path: Path, *, journal: str, pause: str = "",
                 pause_dir: Path | None = None, extra_env: dict[str, str] | None = None):
        super().__init__(broker_url, log_path)
        self.journal, self.pause = journal, pause
        self.pause_dir = pause_dir or log_path.parent / f"pause-{next(_names)}"
        self.extra_env = extra_env or {}

    def env(self) -> dict[str, str]:
        return {**os.environ, "DATABASE_URL": database_url_for_tests(), "CELERY_BROKER_URL": self.broker_url,
                "PYTHONPATH": str(ROOT), "GPUBROKER_FAULTS_JOURNAL": self.journal,
                "GPUBROKER_FAULTS_PAUSE": self.pause, "GPUBROKER_FAULTS_DIR": str(self.pause_dir),
                "GPUBROKER_BACKEND_TIMEOUT_S": str(settings.GPUBROKER_BACKEND_TIMEOUT_S), **self.extra_env}

    def start(self, timeout_s: float = 60.0) -> None:
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "broker.faults.worker", "-l", "info", "--concurrency", "2", "--pool", "threads",
             "-n", f"faults-{os.getpid()}-{next(_names)}@%h", "--without-gossip", "--without-mingle",
             "--without-heartbeat"],
            cwd=ROOT, env=self.env(), stdout=self.log, stderr=subprocess.STDOUT)
        if not wait_for(lambda: self.proc.poll() is not None or "ready." in self.log_path.read_text(), timeout_s):
            raise RuntimeError(f"worker not ready in {timeout_s}s: {self.log_path.read_text()[-2000:]}")
        if self.proc.poll() is not None:
            raise RuntimeError(f"worker exited: {self.log_path.read_text()[-2000:]}")

    @property
    def paused(self) -> bool:
        return (self.pause_dir / "paused").exists()

    def resume(self) -> None:
        self.pause_dir.mkdir(parents=True, exist_ok=True)
        (self.pause_dir / "resume").touch()


class BeatProcess:
    """Celery beat, its intervals from the environment (GPUBROKER_*_INTERVAL_S)."""

    def __init__(self, broker_url: str, folder: Path, intervals: dict[str, int]):
        self.broker_url, self.folder, self.intervals = broker_url, folder, intervals
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        env = {**os.environ, "DATABASE_URL": database_url_for_tests(), "CELERY_BROKER_URL": self.broker_url,
               "PYTHONPATH": str(ROOT), **{k: str(v) for k, v in self.intervals.items()}}
        self.log = open(self.folder / "beat.log", "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "beat", "-l", "info",
             "-s", str(self.folder / "beat-schedule")],
            cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT)

    def stop(self) -> None:
        stop_process(self.proc)
        if self.proc:
            self.log.close()


def redis_restart(port: int = 6379) -> float:
    """Restart the local Redis without persistence (every queued task is lost); returns the
    seconds it was down."""
    started = time.monotonic()
    subprocess.run(["redis-cli", "-p", str(port), "shutdown", "nosave"], capture_output=True, timeout=30)
    wait_for(lambda: subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True).returncode != 0, 10)
    subprocess.run(["redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "--port", str(port),
                    "--save", "", "--appendonly", "no"], capture_output=True, timeout=30, check=True)
    if not wait_for(lambda: subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True,
                                           text=True).stdout.strip() == "PONG", 15):
        raise RuntimeError("redis-server did not come back")
    return time.monotonic() - started
