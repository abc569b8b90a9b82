"""The wheel ships the product only (its failpoints, no-op calls, included): no fault harness
or its command, no API emulator, and no test tooling
(mock, override_settings, jsonschema) imported by anything in it."""
from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEST_TOOLING = re.compile(r"^\s*(from unittest import mock|import unittest\.mock|from unittest\.mock import"
                          r"|from django\.test import .*override_settings|.*\boverride_settings\("
                          r"|import jsonschema|from jsonschema)", re.MULTILINE)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps",
                            "-q", "-w", str(out)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    return zipfile.ZipFile(next(out.glob("gpubroker-*.whl")))


def test_the_wheel_holds_the_product_packages(wheel):
    names = set(wheel.namelist())
    for module in ("broker/lifecycle.py", "broker/services/records/transitions.py", "broker/backends/base.py",
                   "broker/backends/slurm/parsers.py", "accounting/models.py", "config/settings.py",
                   "gpubroker_cli/main.py", "broker/failpoints.py"):
        assert module in names


def test_the_wheel_ships_no_fault_harness_and_no_emulator(wheel):
    shipped = [n for n in wheel.namelist() if n.startswith(("broker/faults/", "tests/")) or "/emu/" in n
               or n.endswith("/fault_harness.py")]
    assert shipped == []


def test_nothing_in_the_wheel_imports_test_tooling(wheel):
    found = [name for name in wheel.namelist() if name.endswith(".py")
             and TEST_TOOLING.search(wheel.read(name).decode("utf-8"))]
    assert found == []
