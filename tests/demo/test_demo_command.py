"""`make demo PORT=8010` serves the portal, its stylesheet and htmx on that port, with debug
off (the default), from a fresh database: what a new user types first."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
START_S = 240  # migrate a fresh SQLite file, seed, start the fleet: slow on a busy 2-core machine


def _free_port(preferred: int = 8010) -> int:
    for port in (preferred, 0):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise RuntimeError("no free port")


def _wait_for(url: str, proc: subprocess.Popen, log: Path) -> requests.Response:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"make demo exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            return requests.get(url, timeout=5)
        except requests.RequestException:
            time.sleep(1)
    pytest.fail(f"make demo did not answer within {START_S} s:\n{log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen) -> None:
    """The command and whatever it started form their own process group (start_new_session)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def test_make_demo_port_serves_pages_and_static_files_on_that_port(tmp_path):
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not installed")
    venv = Path(sys.prefix)
    port, log = _free_port(), tmp_path / "demo.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUBROKER_", "CELERY_", "DATABASE_"))}
    env.update(DATABASE_URL=f"sqlite:///{tmp_path / 'demo.sqlite3'}", PYTHONUNBUFFERED="1")
    # the test runs inside the installed environment: make must not reinstall it (-o: take the stamp as fresh)
    command = [make, "-o", str(venv / ".installed"), f"VENV={venv}", f"PORT={port}", "demo"]
    with log.open("w") as out:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        login = _wait_for(f"{base}/login/", proc, log)
        assert login.status_code == 200 and "/static/portal/site.css" in login.text
        css = requests.get(f"{base}/static/portal/site.css", timeout=10)
        assert css.status_code == 200 and css.headers["Content-Type"].startswith("text/css")
        assert "header.top" in css.text
        htmx = requests.get(f"{base}/static/vendor/htmx.min.js", timeout=10)
        assert htmx.status_code == 200 and "htmx" in htmx.text
        assert f"Serving on http://127.0.0.1:{port}/" in log.read_text()
    finally:
        _stop(proc)
    assert proc.returncode is not None


def test_gunicorn_serves_the_static_files_with_debug_off(tmp_path):
    """docker-compose runs the portal under gunicorn: WhiteNoise serves /static/ there too,
    collected or not."""
    port, log = _free_port(0), tmp_path / "gunicorn.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUBROKER_", "CELERY_", "DATABASE_"))}
    env.update(DATABASE_URL=f"sqlite:///{tmp_path / 'portal.sqlite3'}")
    command = [sys.executable, "-m", "gunicorn", "config.wsgi:application", "--bind", f"127.0.0.1:{port}",
               "--workers", "1"]
    with log.open("w") as out:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        assert _wait_for(f"{base}/healthz", proc, log).status_code == 200
        for path, kind in (("/static/portal/site.css", "text/css"), ("/static/vendor/htmx.min.js", "text/javascript"),
                           ("/static/admin/css/base.css", "text/css")):
            response = requests.get(base + path, timeout=10)
            assert response.status_code == 200 and response.headers["Content-Type"].startswith(kind), path
        assert requests.get(f"{base}/static/portal/missing.css", timeout=10).status_code == 404
    finally:
        _stop(proc)
