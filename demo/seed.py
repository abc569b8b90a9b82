"""Seed the demo: tenants, projects, one user per role, GPU classes, quotas, the
simulated fleet.  Safe to run again: every write is get-or-create."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import transaction

from broker.fleet_file import load_fleet
from broker.models import Quota
from broker.services.fleet.registration import clusters_from_fleet, gpu_classes_from_policy
from portal.tenancy.models import Role
from portal.tenancy.services.tenants import member_ensure, project_ensure, tenant_ensure, user_ensure

DEMO_USERS = (
    ("researcher", "researcher-demo", Role.RESEARCHER, False),
    ("admin", "admin-demo", Role.ADMIN, True),
    ("finance", "finance-demo", Role.FINANCE, False),
    # a second operator: a policy version is approved by its named owner, never its proposer
    ("fleetowner", "fleetowner-demo", Role.ADMIN, True),
)


@dataclass
class DemoSeed:
    users: list[tuple[str, str, str]]
    clusters: list[str]


@transaction.atomic
def demo_seed() -> DemoSeed:
    physics = tenant_ensure(slug="physics", name="Physics Institute")
    biology = tenant_ensure(slug="biology", name="Biology Lab")
    lattice = project_ensure(
        tenant=physics,
        slug="lattice-qcd",
        name="Lattice QCD",
        slurm_account="lattice",
        k8s_namespace="lattice-qcd",
        cost_centre="PHY-100",
    )
    project_ensure(
        tenant=physics,
        slug="cosmo-sim",
        name="Cosmology simulations",
        slurm_account="cosmo",
        k8s_namespace="cosmo-sim",
        cost_centre="PHY-200",
    )
    project_ensure(
        tenant=biology,
        slug="protein-fold",
        name="Protein folding",
        slurm_account="protein",
        k8s_namespace="protein-fold",
        cost_centre="BIO-300",
    )
    users: list[tuple[str, str, str]] = []
    for username, password, role, staff in DEMO_USERS:
        user = user_ensure(username=username, password=password, is_staff=staff)
        for tenant in (physics,) if role == Role.RESEARCHER else (physics, biology):
            member_ensure(user=user, tenant=tenant, role=role)
        users.append((username, password, role))
    classes = gpu_classes_from_policy()
    for tenant, limit in ((physics, 32), (biology, 16)):
        for gpu_class in classes:
            Quota.objects.get_or_create(tenant=tenant, gpu_class=gpu_class, defaults={"limit_gpus": limit})
    clusters = clusters_from_fleet(fleet=load_fleet(settings.GPUBROKER_FLEET_FILE))
    del lattice
    return DemoSeed(users=users, clusters=[c.name for c in clusters])
