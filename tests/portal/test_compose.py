"""docker-compose.yml describes the full stack. These read the file; tests/ops/stack/ brings it
up with podman-compose (marker stack)."""
from __future__ import annotations

from pathlib import Path

import yaml

COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.yml"


def _services() -> dict:
    return yaml.safe_load(COMPOSE.read_text())["services"]


APP = ("migrate", "web-1", "web-2", "worker-1", "worker-2", "beat")


def test_stack_has_database_cache_a_migration_two_webs_behind_a_proxy_two_workers_and_one_beat():
    assert set(_services()) == {"db", "redis", "proxy", *APP}


def test_database_keeps_its_data_in_a_volume_and_services_have_health_checks():
    doc = yaml.safe_load(COMPOSE.read_text())
    services = doc["services"]
    assert any(v.startswith("db-data:") for v in services["db"]["volumes"]) and "db-data" in doc["volumes"]
    for name in ("db", "redis", "proxy", "web-1", "web-2", "worker-1", "worker-2"):
        assert services[name]["healthcheck"]["test"], name


def test_app_services_share_one_environment_pointing_at_postgres_and_redis():
    services = _services()
    envs = [services[name]["environment"] for name in APP]
    assert all(env == envs[0] for env in envs)
    assert envs[0]["DATABASE_URL"].startswith("postgres://") and "@db:5432/" in envs[0]["DATABASE_URL"]
    assert envs[0]["CELERY_BROKER_URL"].startswith("redis://redis:6379")
    for name in APP:
        assert services[name]["depends_on"]["db"]["condition"] == "service_healthy"


def test_the_in_memory_simulator_stays_out_of_the_multi_process_stack():
    env = _services()["worker-1"]["environment"]
    assert env["GPUBROKER_ENABLE_SIMULATOR"] == "false" and env["GPUBROKER_SIM_AUTOLOAD"] == "false"


def test_only_the_migration_migrates_and_the_others_wait_for_it():
    services = _services()
    assert "manage.py migrate --no-input" in " ".join(services["migrate"]["command"])
    for name in APP[1:]:
        command = " ".join(services[name]["command"])
        assert "migrate --check" in command and "migrate --no-input" not in command, name
    assert "exec gunicorn config.wsgi:application" in " ".join(services["web-1"]["command"])
    assert "exec celery -A config worker" in " ".join(services["worker-2"]["command"])
    assert "exec celery -A config beat" in " ".join(services["beat"]["command"])


def test_images_are_built_here_from_debian_not_pulled():
    """No registry is reachable (issue 30): every image is localhost/..., made by scripts/images."""
    root = COMPOSE.parent
    services = _services()
    for name, service in services.items():
        assert service["image"].startswith("localhost/gpubroker"), name
    for name in APP:
        assert services[name]["build"] == {"context": ".", "dockerfile": "Containerfile"}, name
    for containerfile in (root / "Containerfile", *sorted((root / "ops" / "images").glob("*/Containerfile"))):
        froms = [line.split()[1] for line in containerfile.read_text().splitlines() if line.startswith("FROM ")]
        assert froms == ["${BASE_IMAGE}"], containerfile
        assert "ARG BASE_IMAGE=localhost/gpubroker-base:bookworm" in containerfile.read_text(), containerfile
    assert (root / "scripts" / "images").exists()


def test_only_the_proxy_is_published_and_its_port_can_be_moved():
    services = _services()
    assert services["proxy"]["ports"] == ["${GPUBROKER_HTTPS_PORT:-8443}:443"]
    assert [name for name, service in services.items() if "ports" in service] == ["proxy"]
    assert services["proxy"]["environment"]["GPUBROKER_PROXY_UPSTREAMS"] == "web-1:8000 web-2:8000"
