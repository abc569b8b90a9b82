"""A real OpenID Connect provider for the suite: django-oidc-provider (PyPI) as its own
Django project (tests/identity/provider), served by its own process on loopback."""
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
CLIENT_ID, CLIENT_SECRET = "gpubroker-portal", "portal-secret-for-tests-only"
REDIRECT_URI = "http://testserver/oidc/callback/"


@dataclass
class Provider:
    url: str
    env: dict
    db: Path

    def django(self, *args: str, timeout: int = 120) -> str:
        done = subprocess.run([sys.executable, "-m", "django", *args], env=self.env, cwd=ROOT,
                              capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    def call(self, function: str, *args: str) -> None:
        code = ("import django; django.setup(); import sys; from tests.identity.provider import setup_users as s; "
                f"getattr(s, {function!r})(*sys.argv[1:])")
        done = subprocess.run([sys.executable, "-c", code, *args], env=self.env, cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr[-2000:]

    @property
    def discovery(self) -> dict:
        return requests.get(f"{self.url}/openid/.well-known/openid-configuration", timeout=10).json()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def provider(tmp_path_factory):
    folder = tmp_path_factory.mktemp("oidc-provider")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "GPUBROKER_", "CELERY_"))}
    env.update({"DJANGO_SETTINGS_MODULE": "tests.identity.provider.settings", "PYTHONPATH": str(ROOT),
                "OIDC_PROVIDER_DB": str(folder / "provider.sqlite3")})
    port = _free_port()
    op = Provider(url=f"http://127.0.0.1:{port}", env=env, db=folder / "provider.sqlite3")
    op.django("migrate", "--no-input")
    op.django("creatersakey")
    op.call("setup", CLIENT_ID, CLIENT_SECRET, REDIRECT_URI)
    server = subprocess.Popen([sys.executable, "-m", "django", "runserver", "--noreload", f"127.0.0.1:{port}"],
                              env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(150):
            try:
                if requests.get(f"{op.url}/openid/.well-known/openid-configuration", timeout=1).ok:
                    break
            except requests.ConnectionError:
                time.sleep(0.2)
        else:
            pytest.fail("the OpenID Connect provider did not start")
        yield op
    finally:
        server.terminate()
        server.wait(timeout=10)
