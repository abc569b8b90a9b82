"""Where the client finds the server and its token: environment first, then the config file."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path


class ConfigError(Exception):
    """Nothing to connect with, or an unreadable config file."""


@dataclass(frozen=True)
class Config:
    url: str
    token: str


def config_path() -> Path:
    explicit = os.environ.get("GPUBROKER_CONFIG")
    if explicit:
        return Path(explicit)
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "gpubroker" / "config.json"


def save(*, url: str, token: str) -> Path:
    """Write the file readable by its owner only (it holds a secret), replacing it whole."""
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump({"url": url.rstrip("/"), "token": token}, handle)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return path


def load() -> Config:
    stored: dict = {}
    path = config_path()
    if path.exists():
        try:
            stored = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from None
        if not isinstance(stored, dict):
            raise ConfigError(f"{path}: expected a JSON object")
    url = os.environ.get("GPUBROKER_URL") or stored.get("url") or ""
    token = os.environ.get("GPUBROKER_TOKEN") or stored.get("token") or ""
    if not url or not token:
        raise ConfigError(
            "not logged in: run `gpubroker login --url URL --token TOKEN` or set GPUBROKER_URL and GPUBROKER_TOKEN"
        )
    return Config(url=url.rstrip("/"), token=token)
