"""docker-compose.yml describes the full stack; no Docker engine runs here, so check the file."""
from __future__ import annotations

from pathlib import Path

import yaml

COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.yml"


def _services() -> dict:
    return yaml.safe_load(COMPOSE.read_text())["services"]


def test_stack_has_database_cache_web_worker_and_beat():
    assert set(_services()) == {"db", "redis", "web", "worker", "beat"}


def test_database_keeps_its_data_in_a_volume_and_services_have_health_checks():
    doc = yaml.safe_load(COMPOSE.read_text())
    services = doc["services"]
    assert any(v.startswith("db-data:") for v in services["db"]["volumes"]) and "db-data" in doc["volumes"]
    for name in ("db", "redis", "web", "worker"):
        assert services[name]["healthcheck"]["test"], name


def test_app_services_share_one_environment_pointing_at_postgres_and_redis():
    services = _services()
    envs = [services[name]["environment"] for name in ("web", "worker", "beat")]
    assert envs[0] == envs[1] == envs[2]
    assert envs[0]["DATABASE_URL"].startswith("postgres://") and "@db:5432/" in envs[0]["DATABASE_URL"]
    assert envs[0]["CELERY_BROKER_URL"].startswith("redis://redis:6379")
    for name in ("web", "worker", "beat"):
        assert services[name]["depends_on"]["db"]["condition"] == "service_healthy"


def test_commands_run_gunicorn_a_celery_worker_and_beat():
    services = _services()
    assert "gunicorn config.wsgi:application" in " ".join(services["web"]["command"])
    assert services["worker"]["command"][:4] == ["celery", "-A", "config", "worker"]
    assert services["beat"]["command"][:4] == ["celery", "-A", "config", "beat"]


def test_images_are_built_here_from_debian_not_pulled():
    """No registry is reachable (issue 30): every image is localhost/..., made by scripts/images."""
    root = COMPOSE.parent
    services = _services()
    for name, service in services.items():
        assert service["image"].startswith("localhost/gpubroker"), name
    for name in ("web", "worker", "beat"):
        assert services[name]["build"] == {"context": ".", "dockerfile": "Containerfile"}, name
    for containerfile in (root / "Containerfile", *sorted((root / "ops" / "images").glob("*/Containerfile"))):
        froms = [line.split()[1] for line in containerfile.read_text().splitlines() if line.startswith("FROM ")]
        assert froms == ["${BASE_IMAGE}"], containerfile
        assert "ARG BASE_IMAGE=localhost/gpubroker-base:bookworm" in containerfile.read_text(), containerfile
    assert (root / "scripts" / "images").exists()


def test_web_port_on_the_host_can_be_moved():
    assert _services()["web"]["ports"] == ["${GPUBROKER_WEB_PORT:-8000}:8000"]
