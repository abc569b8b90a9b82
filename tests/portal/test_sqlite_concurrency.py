"""Simultaneous submissions on the default database (a SQLite file), against the demo server
itself: every request gets its answer and each stores exactly one workload.

The demo once answered [201, 500, 500, 201] to four simultaneous submissions, and stored the
two 500s anyway, so a client that retried made duplicates.  This runs ``manage.py demo`` in a
subprocess on a fresh SQLite file (with its in-process worker ticking beside the requests)
and sends the submissions from threads, all released at once.
"""
from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests
from django.urls import reverse

ROOT = Path(__file__).resolve().parents[2]
SUBMISSIONS = 12


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def demo_server(tmp_path):
    """The demo on its own SQLite file: (base URL, database path)."""
    db = tmp_path / "demo.sqlite3"
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{db}", "DJANGO_SETTINGS_MODULE": "config.settings",
           "CELERY_BROKER_URL": "", "PYTHONUNBUFFERED": "1"}
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "--noinput", "-v0"], env=env, cwd=ROOT, check=True, timeout=300,
                   capture_output=True)
    port = _free_port()
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen([*manage, "demo", "--addrport", f"127.0.0.1:{port}"], env=env, cwd=ROOT,
                              stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_for(base, server, tmp_path / "server.log")
        yield base, db
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def _wait_for(base: str, server: subprocess.Popen, log: Path, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"demo server exited:\n{log.read_text()[-3000:]}")
        try:
            if requests.get(f"{base}/login/", timeout=2).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"demo server did not answer within {timeout_s} s:\n{log.read_text()[-3000:]}")


def _session(base: str) -> requests.Session:
    session = requests.Session()
    session.get(f"{base}/login/", timeout=10)
    response = session.post(f"{base}/login/", timeout=30, allow_redirects=False, data={
        "username": "researcher", "password": "researcher-demo",
        "csrfmiddlewaretoken": session.cookies["csrftoken"]})
    assert response.status_code == 302, response.text[:500]
    session.headers["X-CSRFToken"] = session.cookies["csrftoken"]
    session.headers["Referer"] = f"{base}/"
    return session


def _project_id(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT id FROM tenancy_project WHERE slug = 'lattice-qcd'").fetchone()[0]


def _workload_names(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [row[0] for row in conn.execute("SELECT name FROM broker_workload")]


def test_simultaneous_submissions_on_sqlite_are_all_answered_and_none_duplicated(demo_server):
    base, db = demo_server
    url = base + reverse("api-workloads")
    project = _project_id(db)
    sessions = [_session(base) for _ in range(SUBMISSIONS)]
    start = threading.Barrier(SUBMISSIONS)
    answers: dict[int, int] = {}

    def submit(i: int) -> None:
        body = {"project": project, "name": f"together-{i}", "command": "python train.py",
                "gpu_class": "a100-80gb", "gpus_per_worker": 1, "workers": 1, "time_limit_minutes": 30}
        start.wait()
        answers[i] = sessions[i].post(url, json=body, timeout=120).status_code

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(SUBMISSIONS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=180)

    assert sorted(answers.values()) == [201] * SUBMISSIONS, answers
    names = _workload_names(db)
    assert sorted(names) == sorted(f"together-{i}" for i in range(SUBMISSIONS))


def test_default_sqlite_database_runs_in_wal_mode_with_immediate_transactions(settings):
    options = settings.DATABASES["default"].get("OPTIONS", {})
    if not settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"):
        pytest.skip("the SQLite options apply to the default database only")
    assert options["transaction_mode"] == "IMMEDIATE" and options["timeout"] >= 5
    assert "journal_mode=WAL" in options["init_command"]
