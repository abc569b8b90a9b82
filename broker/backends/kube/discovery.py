"""Which versions of an API group the API server serves, and what to say when the one a
backend reads is not among them.

A 404 on a custom-object list means either that the group is not installed at all (Volcano
absent from a Kueue-only cluster) or that it is installed at other versions only (Kueue v0.20
serves ``kueue.x-k8s.io/v1beta2`` and no longer ``v1beta1``).  The operator fixes the two
differently, so the message tells them apart, from the API server's own discovery document
(``GET /apis``), and names the missing API.
"""

from __future__ import annotations

from typing import Any, Mapping

# the versions of a group the broker knows how to read, newest first
KNOWN_VERSIONS: Mapping[str, tuple[str, ...]] = {
    "kueue.x-k8s.io": ("v1beta2", "v1beta1"),
    "scheduling.volcano.sh": ("v1beta1",),
}
KUEUE_API_VERSIONS = KNOWN_VERSIONS["kueue.x-k8s.io"]


def served_versions(groups_doc: Mapping[str, Any] | None, group: str) -> tuple[str, ...]:
    """The versions of ``group`` in an ``APIGroupList`` (``GET /apis``); () when absent."""
    for entry in (groups_doc or {}).get("groups") or []:
        if isinstance(entry, Mapping) and entry.get("name") == group:
            versions = entry.get("versions") or []
            return tuple(str(v.get("version")) for v in versions if isinstance(v, Mapping) and v.get("version"))
    return ()


def missing_api_text(where: str, plural: str, group: str, version: str, served: tuple[str, ...] | None) -> str:
    """Why ``plural.group/version`` answered 404 on ``where``.  ``served``: the group's
    versions from discovery, () when the group is not served, None when discovery failed."""
    what = f"{plural}.{group}/{version}"
    if served:
        return (
            f"API version missing: the API server {where} does not serve {what}; "
            f"it serves {group} at {', '.join(served)} only (the cluster's config picks the version)"
        )
    known = KNOWN_VERSIONS.get(group, ())
    if served is not None and len(known) > 1:
        versions = " nor ".join(known)
        return (
            f"CRD missing: the API server {where} serves no version of {group} "
            f"(neither {versions}), so {what} cannot be read: is it installed?"
        )
    return f"CRD missing: the API server {where} does not serve {what}"
