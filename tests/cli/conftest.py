"""A running portal for the CLI: ``manage.py demo`` in a subprocess on its own SQLite file,
with the simulated fleet and the in-process beat schedule, so workloads move by themselves.

The simulated clock runs 600x wall time and the schedule ticks every second, so a job with
a 30-minute limit (it runs half of it) ends a few seconds after it starts."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
SERVER_START_S = 90

_TOKEN_SCRIPT = """
from django.contrib.auth import get_user_model
from portal.apitokens.services.tokens import token_create
for name in ("researcher", "finance"):
    user = get_user_model().objects.get(username=name)
    print("TOKEN", name, token_create(actor=user, name="cli-test", expires_in_days=1).secret)
"""


@dataclass
class Server:
    url: str
    tokens: dict[str, str]
    env: dict[str, str]
    log: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _manage(env: dict, *args: str, timeout: int = 300) -> str:
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _wait_until_up(url: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the demo server exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            if requests.get(url + "/healthz", timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.5)
    pytest.fail(f"the demo server did not answer within {SERVER_START_S} s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Server:
    work = tmp_path_factory.mktemp("cli-server")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUBROKER_", "CELERY_"))}
    env.update(DATABASE_URL=f"sqlite:///{work / 'portal.sqlite3'}", GPUBROKER_SIM_TIME_SCALE="600",
               GPUBROKER_STATUS_INTERVAL_S="1", GPUBROKER_INVENTORY_INTERVAL_S="2",
               GPUBROKER_RECONCILE_INTERVAL_S="5", GPUBROKER_USAGE_INTERVAL_S="3600", PYTHONUNBUFFERED="1")
    _manage(env, "migrate", "--no-input", "-v0")
    _manage(env, "demo", "--seed-only")
    tokens = dict(line.split()[1:] for line in _manage(env, "shell", "-c", _TOKEN_SCRIPT).splitlines()
                  if line.startswith("TOKEN "))
    port, log = _free_port(), work / "server.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "manage.py", "demo", "--addrport", f"127.0.0.1:{port}"],
                                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(url, proc, log)
        yield Server(url=url, tokens=tokens, env=env, log=log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def cli_command() -> list[str]:
    """The installed console script (what a user runs); ``pip install -e .`` puts it beside python."""
    script = Path(sys.executable).parent / "gpubroker"
    return [str(script)] if script.exists() else [sys.executable, "-m", "gpubroker_cli"]


@pytest.fixture
def gpubroker(tmp_path):
    """Run the CLI as its own process with its own config file; returns (exit code, stdout, stderr)."""
    config = tmp_path / "gpubroker" / "config.json"

    def _run(*args: str, env: dict | None = None, timeout: int = 120) -> tuple[int, str, str]:
        run_env = {k: v for k, v in os.environ.items() if not k.startswith("GPUBROKER_")}
        run_env.update(GPUBROKER_CONFIG=str(config), **(env or {}))
        done = subprocess.run([*cli_command(), *args], cwd=tmp_path, env=run_env, capture_output=True,
                              text=True, timeout=timeout)
        return done.returncode, done.stdout, done.stderr

    _run.config = config
    return _run
