"""The policy in force: the active policy release in the database, parsed once per hash.

The file named by GPUBROKER_POLICY_FILE only seeds the first release (an empty database).
``policy_override`` lets a replay run the same services under another policy text (through the
runtime seam, ``broker.runtime``).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Iterator

from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError

from broker import runtime
from broker.models import PolicyVersion
from broker.placement.policy import Policy
from broker.placement.policy_loader import load_policy, policy_version
from broker.policyrelease.models import PolicyRelease, ReleaseState
from broker.policyrelease.services.releases import release_seed_from_file
from broker.policyrelease.validation import PolicyInvalid

_parsed: dict[str, "LoadedPolicy"] = {}  # version hash -> parsed policy


@dataclass(frozen=True)
class LoadedPolicy:
    policy: Policy
    version: str
    source: str
    text: str


def _loaded(text: str, source: str) -> LoadedPolicy:
    version = policy_version(text)
    cached = _parsed.get(version)
    if cached is None:
        cached = _parsed[version] = LoadedPolicy(load_policy(text), version, source, text)
    return cached


def current_policy() -> LoadedPolicy:
    """The active release's policy (one small query; parsing is cached by content hash)."""
    override: LoadedPolicy | None = runtime.current().policy
    if override is not None:
        return override

    row = PolicyRelease.objects.filter(state=ReleaseState.ACTIVE).values_list("version", "number").first()
    if row is not None and row[0] in _parsed:
        return _parsed[row[0]]
    release = _active_or_seed()
    loaded = _loaded(release.content, f"policy release v{release.number}")
    PolicyVersion.objects.get_or_create(
        version=loaded.version, defaults={"content": loaded.text, "source": loaded.source}
    )
    return loaded


def _active_or_seed() -> PolicyRelease:

    release = PolicyRelease.objects.filter(state=ReleaseState.ACTIVE).first()
    if release is not None:
        return release
    if PolicyRelease.objects.exists():
        raise ImproperlyConfigured("no policy release is active: activate one in /policy/")
    try:
        return release_seed_from_file()
    except IntegrityError:  # another process seeded it at the same moment: use theirs
        return PolicyRelease.objects.get(state=ReleaseState.ACTIVE)
    except OSError as exc:
        raise ImproperlyConfigured(f"GPUBROKER_POLICY_FILE: cannot read it: {exc.strerror}") from None
    except PolicyInvalid as exc:
        raise ImproperlyConfigured(f"GPUBROKER_POLICY_FILE: {exc}") from None


@contextlib.contextmanager
def policy_override(text: str, source: str = "replay") -> Iterator[LoadedPolicy]:
    """Within the block, ``current_policy`` is this text (``runtime.override(policy=...)``)."""
    loaded = _loaded(text, source)
    with runtime.override(policy=loaded):
        yield loaded


def policy_in_force() -> PolicyVersion:
    loaded = current_policy()
    record, _ = PolicyVersion.objects.get_or_create(
        version=loaded.version, defaults={"content": loaded.text, "source": loaded.source}
    )
    return record
