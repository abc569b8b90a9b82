"""Settings come from the environment and fail loudly, naming the setting."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.env import broker_url, database_from_url, env_bool, env_int

ROOT = Path(__file__).resolve().parents[2]


def test_no_database_url_means_sqlite_in_the_project_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    db = database_from_url("DATABASE_URL", tmp_path / "db.sqlite3")
    assert db["ENGINE"].endswith("sqlite3") and db["NAME"] == str(tmp_path / "db.sqlite3")


def test_postgres_url_is_split_into_django_settings(monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_URL", "postgres://app:s%40cret@db.example:6543/broker?sslmode=require")
    db = database_from_url("DATABASE_URL", tmp_path / "x")
    assert (db["USER"], db["PASSWORD"], db["HOST"], db["PORT"], db["NAME"]) == (
        "app", "s@cret", "db.example", "6543", "broker")
    assert db["OPTIONS"] == {"sslmode": "require"}


@pytest.mark.parametrize("value, fragment", [
    ("mysql://u@h/db", "unknown scheme 'mysql'"),
    ("postgres://u@h", "no database name"),
    ("postgres://u@h:notaport/db", "bad port"),
])
def test_malformed_database_url_names_the_setting(monkeypatch, tmp_path, value, fragment):
    monkeypatch.setenv("DATABASE_URL", value)
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL") as exc:
        database_from_url("DATABASE_URL", tmp_path / "x")
    assert fragment in str(exc.value)


def test_bad_boolean_and_number_name_their_variable(monkeypatch):
    monkeypatch.setenv("GPUBROKER_DEBUG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="GPUBROKER_DEBUG"):
        env_bool("GPUBROKER_DEBUG", False)
    monkeypatch.setenv("GPUBROKER_TASK_TIME_LIMIT_S", "ten")
    with pytest.raises(ImproperlyConfigured, match="GPUBROKER_TASK_TIME_LIMIT_S"):
        env_int("GPUBROKER_TASK_TIME_LIMIT_S", 120)


def test_unknown_celery_broker_scheme_is_refused(monkeypatch):
    monkeypatch.setenv("CELERY_BROKER_URL", "kafka://x")
    with pytest.raises(ImproperlyConfigured, match="CELERY_BROKER_URL"):
        broker_url("CELERY_BROKER_URL")


def test_start_up_stops_with_a_message_naming_the_bad_setting():
    env = {**os.environ, "DATABASE_URL": "oracle://scott:tiger@db/orcl", "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "DATABASE_URL: unknown scheme 'oracle'" in result.stderr


def _settings_error(**variables: str) -> str:
    """Start-up with these variables: what the settings refuse (empty when they start)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DJANGO_SETTINGS_MODULE": "config.settings", **variables}
    result = subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=60)
    return "" if result.returncode == 0 else result.stderr


def test_bad_time_scale_value_fails_loudly_naming_the_variable():
    error = _settings_error(GPUBROKER_SIM_TIME_SCALE="fast")
    assert "GPUBROKER_SIM_TIME_SCALE: expected a number, got 'fast'" in error
    assert "GPUBROKER_SIM_TIME_SCALE: must be at least 1.0" in _settings_error(GPUBROKER_SIM_TIME_SCALE="0")


def test_the_old_simulator_variables_fail_loudly_naming_their_replacement():
    error = _settings_error(BROKER_SIM_TIME_SCALE="600")
    assert "BROKER_SIM_TIME_SCALE is no longer read: set GPUBROKER_SIM_TIME_SCALE instead" in error
    error = _settings_error(BROKER_SIM_FLEET="/app/broker/fleets/demo.yaml")
    assert "BROKER_SIM_FLEET is no longer read: set GPUBROKER_SIM_AUTOLOAD=true" in error
