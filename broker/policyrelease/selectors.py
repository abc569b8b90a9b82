"""Reads of policy releases.  Policy is fleet-wide: platform operators see every version,
everyone else none (the views answer 404)."""

from __future__ import annotations

import difflib

from django.db.models import QuerySet
from django.http import Http404

from broker.policyrelease.models import ImpactReplay, PolicyRelease, ReleaseState
from portal.tenancy.access import AnyUser, is_operator


def release_list(*, user: AnyUser) -> QuerySet[PolicyRelease]:
    if not is_operator(user):
        return PolicyRelease.objects.none()
    return PolicyRelease.objects.select_related("author", "owner", "approver")


def release_get(*, user: AnyUser, release_id: int) -> PolicyRelease:
    release = release_list(user=user).filter(id=release_id).first()
    if release is None:
        raise Http404("no such policy version")
    return release


def release_active() -> PolicyRelease | None:
    return PolicyRelease.objects.filter(state=ReleaseState.ACTIVE).first()


def release_diff(release: PolicyRelease, against: PolicyRelease | None) -> list[str]:
    """Unified diff of ``against`` (the version in force) -> ``release``."""
    old = against.content.splitlines() if against else []
    name = f"v{against.number} (active)" if against else "(none)"
    return list(
        difflib.unified_diff(old, release.content.splitlines(), fromfile=name, tofile=f"v{release.number}", lineterm="")
    )


def text_diff(old: str, new: str) -> list[str]:
    return list(
        difflib.unified_diff(old.splitlines(), new.splitlines(), fromfile="active", tofile="proposed", lineterm="")
    )


def impact_latest(*, release: PolicyRelease) -> ImpactReplay | None:
    return release.impacts.first()


def release_for_export(*, number: int | None = None) -> PolicyRelease | None:
    if number is None:
        return release_active()
    return PolicyRelease.objects.filter(number=number).first()


def impact_rows(impact: ImpactReplay | None) -> list[dict]:
    """One row per tenant: the active and proposed figures side by side."""
    if impact is None or not impact.result:
        return []
    active, proposed = impact.result.get("active", {}), impact.result.get("proposed", {})
    return [
        {"tenant": t, "active": active.get(t, {}), "proposed": proposed.get(t, {})}
        for t in sorted(set(active) | set(proposed))
    ]
