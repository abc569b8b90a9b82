"""The Celery app's tasks carry the time limits of the settings (GPUBROKER_TASK_TIME_LIMIT_S,
GPUBROKER_USAGE_TASK_TIME_LIMIT_S), not numbers written into the task modules."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from broker.policyrelease.services.impact import IMPACT_TIMEOUT_S
from config.celery import app

ROOT = Path(__file__).resolve().parents[2]
OURS = ("broker.", "accounting.", "portal.")


def _our_tasks() -> dict:
    app.loader.import_default_modules()
    return {name: task for name, task in app.tasks.items() if name.startswith(OURS)}


def test_tasks_carry_the_configured_time_limit():
    tasks = _our_tasks()
    assert "broker.tasks.reconcile" in tasks and "accounting.tasks.collect_usage" in tasks
    for name, task in tasks.items():
        if name.startswith("accounting."):
            expected = (settings.GPUBROKER_USAGE_TASK_TIME_LIMIT_S, settings.GPUBROKER_USAGE_TASK_SOFT_TIME_LIMIT_S)
        elif name == "broker.policyrelease.tasks.run_impact":
            # bounded by the replay it runs (killed after IMPACT_TIMEOUT_S), plus time to record
            expected = (IMPACT_TIMEOUT_S + 60, IMPACT_TIMEOUT_S + 30)
        else:
            expected = (settings.CELERY_TASK_TIME_LIMIT, settings.CELERY_TASK_SOFT_TIME_LIMIT)
        assert (task.time_limit, task.soft_time_limit) == expected, name
        assert task.soft_time_limit < task.time_limit, name


_PROBE = """
import json, django
django.setup()
from accounting import tasks as accounting_tasks
from broker import tasks
from broker.backends.sim import SimulatorFleet
from django.conf import settings
fleet = SimulatorFleet.instance()
print(json.dumps({
    "broker": [tasks.reconcile.time_limit, tasks.reconcile.soft_time_limit],
    "usage": [accounting_tasks.collect_usage.time_limit, accounting_tasks.collect_usage.soft_time_limit],
    "budget": settings.GPUBROKER_RECONCILE_BUDGET_S,
    "clock": [fleet.clock.follow_wall, fleet.clock.time_scale],
    "clusters": sorted(fleet.names()),
}))
"""


def test_settings_from_the_environment_reach_the_tasks_and_the_simulated_fleet():
    """A fresh worker process: the environment is read once, by the settings, and what the
    tasks and the simulator use is what the settings passed down."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DJANGO_SETTINGS_MODULE": "config.settings",
           "GPUBROKER_TASK_TIME_LIMIT_S": "300", "GPUBROKER_USAGE_TASK_TIME_LIMIT_S": "900",
           "GPUBROKER_SIM_AUTOLOAD": "true", "GPUBROKER_SIM_TIME_SCALE": "600"}
    result = subprocess.run([sys.executable, "-c", _PROBE], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["broker"] == [300, 290] and seen["usage"] == [900, 880] and seen["budget"] == 150
    assert seen["clock"] == [True, 600.0] and "onprem-slurm" in seen["clusters"]
