"""Name look-ups shared by ledger ingest and bill import: account -> project, model -> class.

Built once per ingest (the tables are small) so a million records cost no extra queries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from broker.models import GpuClass
from portal.tenancy.models import Project
from portal.identity.models import ClusterIdentity


@dataclass(frozen=True)
class ProjectRef:
    id: int
    tenant_id: int


class ProjectResolver:
    """Scheduler account / namespace / slug -> project, optionally inside one tenant."""

    def __init__(self, tenant_id: int | None = None):
        projects = Project.objects.all()
        if tenant_id is not None:
            projects = projects.filter(tenant_id=tenant_id)
        self.by_account: dict[str, ProjectRef] = {}
        self.by_namespace: dict[str, ProjectRef] = {}
        self.by_slug: dict[str, list[ProjectRef]] = {}
        for p in projects.values("id", "tenant_id", "slug", "slurm_account", "k8s_namespace", "tenant__slug"):
            ref = ProjectRef(p["id"], p["tenant_id"])
            if p["slurm_account"]:
                self.by_account[p["slurm_account"]] = ref
            if p["k8s_namespace"]:
                self.by_namespace[p["k8s_namespace"]] = ref
            self.by_slug.setdefault(p["slug"], []).append(ref)
            self.by_slug[f"{p['tenant__slug']}/{p['slug']}"] = [ref]

    def for_account(self, account: str, *, source: str) -> ProjectRef | None:
        # Slurm speaks accounts, Kubernetes namespaces: ask the source's own name first.
        first, second = (
            (self.by_account, self.by_namespace) if source == "slurm" else (self.by_namespace, self.by_account)
        )
        return first.get(account) or second.get(account)

    def for_tag(self, value: str) -> ProjectRef | None:
        """A bill tag: slug (unique), tenant/slug, Slurm account or namespace."""
        value = value.strip()
        slug_refs = self.by_slug.get(value, [])
        if len(slug_refs) == 1:
            return slug_refs[0]
        return self.by_namespace.get(value) or self.by_account.get(value)


_TOKEN = re.compile(r"[a-z0-9]+")


class GpuClassResolver:
    """GPU model text -> GPU class: exact model or slug, else the one class whose slug shares
    its tokens ("a100" from sacct, "Nvidia Tesla A100 GPU" from a bill -> "a100-80gb")."""

    def __init__(self) -> None:
        self.exact: dict[str, int] = {}
        self.tokens: dict[str, set[int]] = {}
        for gc in GpuClass.objects.values("id", "slug", "gpu_models"):
            for name in [gc["slug"], *(gc["gpu_models"] or [])]:
                self.exact[name.lower()] = gc["id"]
            # only the slug's tokens: model names carry vendor words ("nvidia") that say nothing
            for tok in _TOKEN.findall(gc["slug"].lower()):
                self.tokens.setdefault(tok, set()).add(gc["id"])
        self._cache: dict[str, int | None] = {}

    def for_model(self, model: str) -> int | None:
        key = model.lower().strip()
        if key not in self._cache:
            self._cache[key] = self._lookup(key)
        return self._cache[key]

    def _lookup(self, key: str) -> int | None:
        if not key:
            return None
        if key in self.exact:
            return self.exact[key]
        # "a100" (a Slurm GRES type) names a class only when exactly one class has that token
        candidates = [self.tokens[tok] for tok in _TOKEN.findall(key) if tok in self.tokens and not tok.isdigit()]
        hits = set.intersection(*candidates) if candidates else set()
        return next(iter(hits)) if len(hits) == 1 else None


class PersonResolver:
    """Cluster user name -> the person whose cluster identity it is (jobs outside the broker
    that ran as a person are charged to them)."""

    def __init__(self) -> None:

        self.by_posix: dict[str, int] = dict(ClusterIdentity.objects.values_list("posix_user", "user_id"))

    def for_cluster_user(self, name: str) -> int | None:
        return self.by_posix.get(name) if name else None
