"""A Celery worker with the fault hooks installed, for tests that kill real processes.

    GPUBROKER_FAULTS_JOURNAL=/tmp/j.sqlite3 \\
    GPUBROKER_FAULTS_PAUSE=dispatch.after_submit GPUBROKER_FAULTS_DIR=/tmp/pause \\
        python -m broker.faults.worker -l info --pool threads --concurrency 2

* ``GPUBROKER_FAULTS_JOURNAL``: simulator clusters are journal clusters in that file
  (broker.faults.journal), so what reached a destination survives the worker;
* ``GPUBROKER_FAULTS_PAUSE``: a failpoint (broker.failpoints) or a destination hook (see
  broker.faults.points), e.g. ``dispatch.after_submit``; the first time the
  worker reaches it, it writes ``$GPUBROKER_FAULTS_DIR/paused`` and waits (up to
  ``GPUBROKER_FAULTS_PAUSE_S``, 120 s) for ``$GPUBROKER_FAULTS_DIR/resume``.  The test
  kills the worker there, cuts its database connections, or restarts Redis.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

_installed = contextlib.ExitStack()


def pause_action(directory: str, limit_s: float = 120.0):
    def act(hook: str, cluster: str) -> None:
        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "paused").write_text(f"{hook} {cluster} {os.getpid()}\n")
        deadline = time.monotonic() + limit_s
        while not (folder / "resume").exists() and time.monotonic() < deadline:
            time.sleep(0.05)

    return act


def install_from_env() -> None:
    """Install the journal builder and the pause hook this environment asks for."""
    from broker.faults.install import failpoint_hooks, faulty_backends
    from broker.faults.journal import journal_builder
    from broker.faults.points import FaultPlan

    journal = os.environ.get("GPUBROKER_FAULTS_JOURNAL", "")
    pause = os.environ.get("GPUBROKER_FAULTS_PAUSE", "")
    plan = FaultPlan()
    if pause:
        plan.arm(
            "pause",
            hook=pause,
            times=int(os.environ.get("GPUBROKER_FAULTS_PAUSE_TIMES", "1")),
            action=pause_action(
                os.environ.get("GPUBROKER_FAULTS_DIR", "/tmp/gpubroker-faults"),
                float(os.environ.get("GPUBROKER_FAULTS_PAUSE_S", "120")),
            ),
        )
    builders = {"simulator": journal_builder(journal)} if journal else {}
    _installed.enter_context(faulty_backends(plan, builders))
    _installed.enter_context(failpoint_hooks(plan))


def main(argv: list[str] | None = None) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    install_from_env()
    from celery.__main__ import main as celery_main

    sys.argv = ["celery", "-A", "config", "worker", *(sys.argv[1:] if argv is None else argv)]
    celery_main()


if __name__ == "__main__":
    main()
