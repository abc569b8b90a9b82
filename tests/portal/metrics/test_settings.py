"""The /metrics settings are read once at start-up and fail loudly, naming the variable."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.env import env_networks, env_secret

ROOT = Path(__file__).resolve().parents[3]


def test_allow_list_takes_addresses_and_networks(monkeypatch):
    monkeypatch.setenv("GPUBROKER_METRICS_ALLOW", "127.0.0.1, ::1, 10.0.0.0/8")
    assert env_networks("GPUBROKER_METRICS_ALLOW", []) == ["127.0.0.1", "::1", "10.0.0.0/8"]
    monkeypatch.delenv("GPUBROKER_METRICS_ALLOW")
    assert env_networks("GPUBROKER_METRICS_ALLOW", ["127.0.0.1"]) == ["127.0.0.1"]


def test_a_bad_allow_list_entry_names_the_variable_and_the_entry(monkeypatch):
    monkeypatch.setenv("GPUBROKER_METRICS_ALLOW", "127.0.0.1,prometheus.internal")
    with pytest.raises(ImproperlyConfigured, match="GPUBROKER_METRICS_ALLOW: 'prometheus.internal'"):
        env_networks("GPUBROKER_METRICS_ALLOW", [])


@pytest.mark.parametrize("value", ["short", "has a space in it long enough"])
def test_a_weak_or_malformed_token_is_refused(monkeypatch, value):
    monkeypatch.setenv("GPUBROKER_METRICS_TOKEN", value)
    with pytest.raises(ImproperlyConfigured, match="GPUBROKER_METRICS_TOKEN"):
        env_secret("GPUBROKER_METRICS_TOKEN", min_length=16)


def test_no_token_means_the_allow_list_alone(monkeypatch):
    monkeypatch.delenv("GPUBROKER_METRICS_TOKEN", raising=False)
    assert env_secret("GPUBROKER_METRICS_TOKEN", min_length=16) == ""


def test_start_up_stops_on_a_bad_allow_list():
    env = {**os.environ, "GPUBROKER_METRICS_ALLOW": "10.0.0.0/33", "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "GPUBROKER_METRICS_ALLOW: '10.0.0.0/33'" in result.stderr
