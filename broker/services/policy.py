"""The policy in force: read from the policy file, its content hash is its version."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from broker.models import PolicyVersion
from broker.placement.policy import Policy, PolicyError
from broker.placement.policy_loader import load_policy, policy_version

_cache: dict[str, tuple[float, "LoadedPolicy"]] = {}


@dataclass(frozen=True)
class LoadedPolicy:
    policy: Policy
    version: str
    source: str
    text: str


def current_policy() -> LoadedPolicy:
    """Load the file (cached by modification time) and record its version once."""
    path = Path(settings.GPUBROKER_POLICY_FILE)
    try:
        mtime = path.stat().st_mtime
    except OSError as exc:
        raise ImproperlyConfigured(f"GPUBROKER_POLICY_FILE: cannot read {path}: {exc.strerror}") from None
    cached = _cache.get(str(path))
    if cached and cached[0] == mtime:
        return cached[1]
    text = path.read_text()
    try:
        policy = load_policy(text)
    except PolicyError as exc:
        raise ImproperlyConfigured(f"GPUBROKER_POLICY_FILE {path}: {exc}") from None
    loaded = LoadedPolicy(policy=policy, version=policy_version(text), source=str(path), text=text)
    PolicyVersion.objects.update_or_create(
        version=loaded.version, defaults={"content": text, "source": str(path)})
    _cache[str(path)] = (mtime, loaded)
    return loaded


def policy_in_force() -> PolicyVersion:
    loaded = current_policy()
    record, _ = PolicyVersion.objects.get_or_create(
        version=loaded.version, defaults={"content": loaded.text, "source": loaded.source})
    return record
