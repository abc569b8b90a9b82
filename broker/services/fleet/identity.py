"""The project identity on the control planes: make sure each project's Slurm account
exists on each Slurm cluster, or say that it is missing."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db.models import Q

from broker.backends.base import Backend, BackendError
from broker.backends.registry import backend_for
from broker.models import Cluster, ClusterKind
from broker.services.records.audit import audit
from portal.identity.models import ClusterIdentity
from portal.tenancy.models import Membership, Project, Role, RunAs


@dataclass(frozen=True)
class AccountCheck:
    project: str
    cluster: str
    account: str
    exists: bool
    created: bool
    detail: str


def slurm_accounts_ensure(*, create: bool, actor: User | None = None) -> list[AccountCheck]:
    """Check (and with ``create``, add through sacctmgr) every project's Slurm account."""
    results = []
    projects = list(Project.objects.exclude(slurm_account="").select_related("tenant"))
    for cluster in Cluster.objects.filter(kind=ClusterKind.SLURM, enabled=True):
        backend = backend_for(cluster)
        for project in projects:
            results.append(_one(backend, cluster, project, create, actor))
    return results


def _people_of(project: Project) -> tuple[str, ...]:
    """POSIX users of the researchers of a project whose jobs run as the person."""
    if project.run_as != RunAs.PERSON:
        return ()
    members = Membership.objects.filter(tenant_id=project.tenant_id, role=Role.RESEARCHER).filter(
        Q(project__isnull=True) | Q(project=project)
    )
    return tuple(
        sorted(
            ClusterIdentity.objects.filter(user_id__in=members.values("user_id")).values_list("posix_user", flat=True)
        )
    )


def _one(backend: Backend, cluster: Cluster, project: Project, create: bool, actor: User | None) -> AccountCheck:
    try:
        # the broker's submitting user needs an association with the account, or sbatch refuses;
        # so does each person a run-as-person project submits as
        users = tuple(u for u in [(cluster.config or {}).get("submit_user", "")] if u) + _people_of(project)
        # a Slurm cluster's backend (the only kind these projects are checked on) keeps accounts
        ensure_account = getattr(backend, "ensure_account")  # noqa: B009 (not on the Backend protocol)
        status = ensure_account(
            project.slurm_account, users, create=create, description=project.name[:60], organization=project.tenant.slug
        )
    except BackendError as exc:
        return AccountCheck(str(project), cluster.name, project.slurm_account, False, False, str(exc))
    if status.created:
        audit(
            action="identity.slurm_account_created",
            tenant_id=project.tenant_id,
            actor=actor,
            cluster=cluster.name,
            message=f"account {project.slurm_account} for {project}",
        )
    return AccountCheck(str(project), cluster.name, project.slurm_account, status.exists, status.created, status.detail)
