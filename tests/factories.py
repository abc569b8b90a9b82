"""factory_boy factories shared by every test package."""
from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from broker.models import Cluster, GpuClass, GpuPool, Quota, Workload
from portal.tenancy.models import Membership, Project, Role, Tenant

PASSWORD = "pw-for-tests-1"


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.org")
    password = factory.django.Password(PASSWORD)


class TenantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Tenant
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"tenant-{n}")
    name = factory.LazyAttribute(lambda t: t.slug.title())


class ProjectFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Project

    tenant = factory.SubFactory(TenantFactory)
    slug = factory.Sequence(lambda n: f"project-{n}")
    name = factory.LazyAttribute(lambda p: p.slug.title())
    slurm_account = factory.LazyAttribute(lambda p: p.slug.replace("-", "")[:20])
    k8s_namespace = factory.LazyAttribute(lambda p: p.slug)
    cost_centre = factory.Sequence(lambda n: f"CC-{1000 + n}")


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    user = factory.SubFactory(UserFactory)
    tenant = factory.SubFactory(TenantFactory)
    role = Role.RESEARCHER


class GpuClassFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = GpuClass
        django_get_or_create = ("slug",)

    slug = "a100-80gb"
    name = "A100 80GB"
    gpu_models = factory.LazyFunction(lambda: ["A100 80GB", "NVIDIA A100-SXM4-80GB"])
    min_memory_gb = 80


class ClusterFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Cluster
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"cluster-{n}")
    kind = "simulator"
    region = "eu-west"
    location = "onprem"
    price_per_gpu_hour = Decimal("1.20")
    health = "healthy"
    last_inventory_at = factory.LazyFunction(timezone.now)


class GpuPoolFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = GpuPool

    cluster = factory.SubFactory(ClusterFactory)
    name = "gpu"
    gpu_model = "A100 80GB"
    gpu_memory_gb = 80
    owner = "slurm"
    gpus_total = 16
    gpus_allocatable = 16
    taken_at = factory.LazyFunction(timezone.now)


class QuotaFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Quota

    tenant = factory.SubFactory(TenantFactory)
    gpu_class = factory.SubFactory(GpuClassFactory)
    limit_gpus = 16


class WorkloadFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Workload

    project = factory.SubFactory(ProjectFactory)
    tenant = factory.LazyAttribute(lambda w: w.project.tenant)
    name = factory.Sequence(lambda n: f"job-{n}")
    gpu_class = factory.SubFactory(GpuClassFactory)
    total_gpus = 2
    spec = factory.LazyAttribute(lambda w: {
        "project": w.project.slug, "name": w.name, "command": "python train.py",
        "gpu_class": w.gpu_class.slug, "gpus_per_worker": w.total_gpus, "workers": 1})
