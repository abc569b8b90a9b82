"""`manage.py check --deploy` with the environment docker-compose.yml gives the app
reports no issue; the HTTPS setting makes cookies secure, sends HSTS and redirects."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
STRONG_KEY = "k" * 10 + "Q7v!x2Lp9#Zr4Ws8Yt1Nb6Hm3Jc5Gd0Fe-Ua_Oi" + "s" * 10


def _compose_env() -> dict[str, str]:
    env = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["x-app-env"]
    given = {"GPUBROKER_SECRET_KEY": STRONG_KEY}  # compose refuses to start without one

    def expand(value: str) -> str:
        def one(m: re.Match) -> str:
            name, op, default = m.group(1), m.group(2) or "", m.group(3) or ""
            if name in given:
                return given[name]
            assert op != ":?", f"compose requires {name}"
            return default
        return re.sub(r"\$\{(\w+)(:-|:\?)?([^}]*)\}", one, str(value))

    return {k: expand(v) for k, v in env.items()}


def test_check_deploy_with_the_compose_configuration_reports_no_issue():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUBROKER_", "DATABASE_URL", "CELERY_"))}
    env.update(_compose_env())
    assert env["GPUBROKER_HTTPS"] == "true"
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


def test_without_https_the_same_check_names_the_four_missing_settings():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUBROKER_", "DATABASE_URL", "CELERY_"))}
    env.update({**_compose_env(), "GPUBROKER_HTTPS": "false"})
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in result.stdout + result.stderr


@pytest.mark.django_db
def test_https_setting_redirects_plain_http_but_not_the_health_check(client, settings):
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    assert client.get("/login/").status_code == 301
    assert client.get("/login/", HTTP_X_FORWARDED_PROTO="https").status_code == 200
    assert client.get("/healthz").status_code == 200
