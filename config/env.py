"""Read settings from the environment, failing loudly and naming the variable."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured
import ipaddress

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}

DB_ENGINES = {
    "postgres": "django.db.backends.postgresql",
    "postgresql": "django.db.backends.postgresql",
    "sqlite": "django.db.backends.sqlite3",
}


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}: expected true/false, got {raw!r}")


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}: expected a whole number, got {raw!r}") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name}: must be at least {minimum}, got {value}")
    return value


def env_float(name: str, default: float, *, minimum: float = 0.0) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}: expected a number, got {raw!r}") from None
    if not value >= minimum:
        raise ImproperlyConfigured(f"{name}: must be at least {minimum}, got {raw!r}")
    return value


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    """One of a few words (case-insensitive); empty or unset: the default."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value not in choices:
        raise ImproperlyConfigured(f"{name}: expected one of {', '.join(choices)}, got {raw!r}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def database_from_url(name: str, default_sqlite: Path) -> dict:
    """DATABASE_URL: postgres://user:pass@host:port/db or sqlite:///path (empty: SQLite file)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return {"ENGINE": DB_ENGINES["sqlite"], "NAME": str(default_sqlite)}
    parts = urlsplit(raw)
    engine = DB_ENGINES.get(parts.scheme)
    if engine is None:
        raise ImproperlyConfigured(
            f"{name}: unknown scheme {parts.scheme!r} in {raw!r}; use one of {', '.join(sorted(DB_ENGINES))}"
        )
    if engine.endswith("sqlite3"):
        path = unquote(parts.path[1:] if parts.path.startswith("//") else parts.path)
        path = path[1:] if raw.startswith("sqlite:///") and path.startswith("//") else path
        if not path:
            raise ImproperlyConfigured(f"{name}: sqlite URL needs a file path, got {raw!r}")
        return {"ENGINE": engine, "NAME": path}
    db_name = unquote(parts.path.lstrip("/"))
    if not db_name:
        raise ImproperlyConfigured(f"{name}: no database name in {raw!r}")
    try:
        port = parts.port
    except ValueError:
        raise ImproperlyConfigured(f"{name}: bad port in {raw!r}") from None
    options = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    return {
        "ENGINE": engine,
        "NAME": db_name,
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(port or ""),
        "OPTIONS": options,
        "CONN_MAX_AGE": 0,
    }


def broker_url(name: str) -> str:
    """CELERY_BROKER_URL: redis://, rediss:// or amqp://; empty means run tasks in-process."""
    raw = os.environ.get(name, "").strip()
    if raw and urlsplit(raw).scheme not in ("redis", "rediss", "amqp", "memory"):
        raise ImproperlyConfigured(
            f"{name}: unknown scheme {urlsplit(raw).scheme!r} in {raw!r}; use redis:// or amqp://"
        )
    return raw


def env_networks(name: str, default: list[str]) -> list[str]:
    """Comma-separated IP addresses or networks (``10.0.0.0/8``); each is checked here."""

    items = env_list(name, default)
    for item in items:
        try:
            ipaddress.ip_network(item, strict=False)
        except ValueError:
            raise ImproperlyConfigured(f"{name}: {item!r} is not an IP address or network") from None
    return items


def env_secret(name: str, *, min_length: int) -> str:
    """An optional secret: empty, or at least ``min_length`` characters without spaces."""
    value = os.environ.get(name, "").strip()
    if value and (len(value) < min_length or any(ch.isspace() for ch in value)):
        raise ImproperlyConfigured(f"{name}: must be at least {min_length} characters without spaces")
    return value


def env_renamed(old: str, new: str) -> None:
    """A variable that was renamed: set under its old name it would be ignored in silence,
    so settings refuse to start and say what to set instead."""
    if old in os.environ:
        raise ImproperlyConfigured(f"{old} is no longer read: set {new} instead")
