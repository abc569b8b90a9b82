"""Register clusters from a fleet description and GPU classes from the policy."""

from __future__ import annotations

from decimal import Decimal

from django.db import transaction

from broker.fleet_file import FleetDescription
from broker.models import Cluster, GpuClass
from broker.services.records.audit import audit
from broker.services.fleet.policy import current_policy


@transaction.atomic
def gpu_classes_from_policy() -> list[GpuClass]:
    """Keep the GpuClass rows (what quotas count in) in step with the policy file."""
    out = []
    for slug, cls in current_policy().policy.gpu_classes.items():
        row, _ = GpuClass.objects.update_or_create(
            slug=slug,
            defaults={
                "name": slug.upper().replace("-", " "),
                "gpu_models": list(cls.models),
                "min_memory_gb": cls.min_memory_gb,
            },
        )
        out.append(row)
    return out


@transaction.atomic
def clusters_from_fleet(*, fleet: FleetDescription) -> list[Cluster]:
    """Create or update one Cluster row per described cluster (idempotent)."""
    out = []
    for desc in fleet.clusters:
        elastic = desc.elastic_pools
        config = {
            "flavor": desc.flavor,
            "image_pull_s": desc.image_pull_s,
            # an elastic pool's nodes come after their delay: placement counts the longest
            "provisioning_s": max([desc.provisioning_s, *(p["provisioning_s"] for p in elastic.values())]),
            "data_locations": list(desc.data_locations),
            **({"elastic_pools": elastic} if elastic else {}),
        }
        cluster, created = Cluster.objects.update_or_create(
            name=desc.name,
            defaults={
                "kind": desc.kind,
                "region": desc.region,
                "location": desc.location,
                "price_per_gpu_hour": Decimal(str(desc.price_per_gpu_hour)),
                "egress_per_gb": Decimal(str(desc.egress_per_gb)),
                "config": config,
            },
        )
        if created:
            audit(action="cluster.registered", cluster=cluster.name, message=f"{desc.kind}/{desc.flavor}")
        out.append(cluster)
    return out
