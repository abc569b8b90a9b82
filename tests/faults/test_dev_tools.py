"""``manage.py fault_harness`` exists only when GPUBROKER_DEV_TOOLS enables the development
tools (a source checkout; the wheel ships no broker/faults), and a bad value stops start-up."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _manage(*args: str, dev_tools: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "GPUBROKER_DEV_TOOLS"}
    if dev_tools is not None:
        env["GPUBROKER_DEV_TOOLS"] = dev_tools
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


def test_without_the_development_setting_there_is_no_fault_harness_command():
    listed = _manage("help", "--commands", dev_tools=None)
    assert listed.returncode == 0, listed.stderr
    assert "fault_harness" not in listed.stdout.split()
    assert "migrate" in listed.stdout.split()


def test_the_development_setting_makes_the_fault_harness_command_available():
    helped = _manage("fault_harness", "--help", dev_tools="1")
    assert helped.returncode == 0, helped.stderr
    assert "--points" in helped.stdout and "--workloads" in helped.stdout


def test_a_bad_development_setting_stops_start_up_naming_the_variable():
    refused = _manage("check", dev_tools="perhaps")
    assert refused.returncode != 0
    assert "GPUBROKER_DEV_TOOLS" in refused.stderr and "perhaps" in refused.stderr
