"""Preview: where a spec would go now, when it would likely start and what it would cost,
without storing a workload, reserving quota or touching a pool's hold.

It gathers the inputs exactly as ``placing.workload_place`` does for a workload just
submitted (nothing tried yet, no age, no hold of its own), so the ranking it shows is the
one a submission of the same spec gets at the same moment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Mapping

from django.contrib.auth.models import User

from broker.models import Cluster, GpuClass, Location
from broker.placement import Candidate, PreparedFleet, place_prepared, queue_candidates
from broker.placement.results import REASON_CAPACITY
from broker.placement import terms as placement_terms
from broker.services.placing.fleet_view import identity_scopes
from broker.services.placing.gang_holds import apply_holds
from broker.services.placing.queueing import queued_after
from broker.selectors.run_times import runtime_hours_for
from broker.services.placing.fleet_view import fleet_inputs
from broker.services.fleet.policy import current_policy
from broker.services.quota.reservations import QuotaUse, quota_use
from broker.services.submitting.workloads import (
    check_budgets,
    check_data_location,
    check_priority,
    resolve_gpu_class,
    resolve_priority_class,
)
from broker.placement.budgets import Standing
from broker.spec import WorkloadSpec, validate_spec
from portal.metrics.readings import cloud_spend_month, spend_per_tenant
from portal.tenancy.models import Project, Role
from portal.tenancy.selectors import project_get
from broker import runtime

CENT = Decimal("0.01")


@dataclass(frozen=True)
class Destination:
    rank: int
    cluster: str
    pool: str
    location: str
    score: float
    terms: Mapping[str, float]
    weighted: Mapping[str, float]
    queue_wait_s: float
    expected_start: datetime
    gpu_hours: float
    rate_per_gpu_hour: Decimal
    gpu_cost: Decimal
    egress_cost: Decimal
    budget_warning: str = ""
    # where the spec prefers a topology level: whether this pool keeps the gang in one of it
    topology: str = ""

    @property
    def expected_cost(self) -> Decimal:
        return self.gpu_cost + self.egress_cost


@dataclass(frozen=True)
class Preview:
    project: Project
    gpu_class: GpuClass
    spec: WorkloadSpec
    policy_version: str
    reason: str  # why nothing fits now ("" when something does)
    destinations: list[Destination]
    excluded: dict[str, dict[str, str]]
    quota: QuotaUse
    cloud_budget_month: Decimal | None
    cloud_spend_month: Decimal
    warnings: list[str] = field(default_factory=list)
    # nothing fits now: the destinations are the queues it would wait in after this long
    # at the broker (None: they are where it fits now)
    queued_after_s: float | None = None
    # the GPU-hour budgets it counts against, its ask included
    budgets: list[Standing] = field(default_factory=list)

    @property
    def chosen(self) -> Destination | None:
        return self.destinations[0] if self.destinations else None


def workload_preview(
    *, user: User, project_id: int, spec_data: Mapping[str, object], now: datetime | None = None
) -> Preview:
    """The same checks as a submission (SpecError naming the field, 404 for a project the
    user may not submit to), then placement against the fleet as it is now.  Reads only."""
    now = now or runtime.now()
    project = project_get(user=user, project_id=project_id, roles=(Role.RESEARCHER,))
    spec = resolve_priority_class(validate_spec({**spec_data, "project": project.slug}), project.tenant.slug)
    gpu_class = resolve_gpu_class(spec)
    check_data_location(spec)
    check_priority(spec, project.tenant.slug)
    standings = check_budgets(spec, project, gpu_class)
    loaded = current_policy()
    use = quota_use(tenant_id=project.tenant_id, gpu_class_id=gpu_class.id)
    snapshots, facts, forced = fleet_inputs(rejections={}, now=now)
    fleet = PreparedFleet(snapshots, facts, loaded.policy)
    apply_holds(fleet, clear_stale=False)
    hours = runtime_hours_for(project_id=project.id, gpu_class_id=gpu_class.id)
    burst = loaded.policy.tenant(project.tenant.slug).burst_gpus
    result = place_prepared(
        fleet,
        spec,
        tenant=project.tenant.slug,
        quota_remaining=use.remaining,
        now=now,
        age_s=0.0,
        runtime_hours=hours,
        holder="",
        cloud_quota_remaining=use.remaining_with(burst) if burst else None,
        scopes=identity_scopes(project),
    )
    excluded = {**result.excluded, **forced}
    ranked = [c for c in result.ranked if c.cluster not in forced]
    queued = False
    if not ranked and result.reason == REASON_CAPACITY:
        # nothing fits now: after a while at the broker it would wait in a cluster's queue
        candidates = queue_candidates(
            fleet,
            spec,
            tenant=project.tenant.slug,
            quota_remaining=use.remaining,
            now=now,
            runtime_hours=hours,
            cloud_quota_remaining=use.remaining_with(burst) if burst else None,
            scopes=identity_scopes(project),
        )
        ranked = [c for c in queued_after(fleet, candidates, spec, identity_scopes(project)) if c.cluster not in forced]
        queued = bool(ranked)
    budget = project.tenant.cloud_budget_month
    spent = _tenant_cloud_spend(project.tenant_id, now)
    clusters = {c.name: c for c in Cluster.objects.filter(name__in={c.cluster for c in ranked})}
    gpu_hours = spec.total_gpus * placement_terms.runtime_hours(spec, hours)
    destinations = [
        _destination(i + 1, c, clusters[c.cluster], now, gpu_hours, budget, spent) for i, c in enumerate(ranked)
    ]
    warnings = [d.budget_warning for d in destinations[:1] if d.budget_warning]
    warnings += [f"This job brings the {s.words()}." for s in standings if s.warns]
    return Preview(
        project=project,
        gpu_class=gpu_class,
        spec=spec,
        policy_version=loaded.version,
        reason=result.reason if not ranked or queued else "",
        queued_after_s=loaded.policy.aging.queue_after_s if queued else None,
        destinations=destinations,
        excluded={k: {"rule": v.rule, "message": v.message} for k, v in sorted(excluded.items())},
        quota=use,
        cloud_budget_month=budget,
        cloud_spend_month=spent,
        warnings=warnings,
        budgets=standings,
    )


def _tenant_cloud_spend(tenant_id: int, now: datetime) -> Decimal:
    return spend_per_tenant(cloud_spend_month(now)).get(tenant_id, Decimal("0").quantize(CENT))


def _destination(
    rank: int,
    candidate: Candidate,
    cluster: Cluster,
    now: datetime,
    gpu_hours: float,
    budget: Decimal | None,
    spent: Decimal,
) -> Destination:
    terms = dict(candidate.breakdown)
    rate = cluster.price_per_gpu_hour
    gpu_cost = Decimal(str(terms["gpu_cost"])).quantize(CENT)
    egress = Decimal(str(terms["transfer_cost"])).quantize(CENT)
    wait_s = float(terms["queue_wait_s"])
    start = now + timedelta(seconds=wait_s + float(terms["startup_s"]))
    warning = ""
    if cluster.location == Location.CLOUD and budget is not None and spent + gpu_cost + egress > budget:
        warning = (
            f"{cluster.name} is a cloud cluster: this job's expected {gpu_cost + egress} on top of the "
            f"{spent} already spent this month passes the tenant's monthly cloud budget of {budget}."
        )
    return Destination(
        rank=rank,
        cluster=candidate.cluster,
        pool=candidate.pool,
        location=cluster.location,
        score=candidate.score,
        terms=terms,
        weighted=dict(candidate.weighted),
        queue_wait_s=wait_s,
        expected_start=start,
        gpu_hours=round(gpu_hours / candidate.units_per_gpu, 4),  # a share job: its share of the GPUs
        rate_per_gpu_hour=rate,
        gpu_cost=gpu_cost,
        egress_cost=egress,
        budget_warning=warning,
        topology=str(candidate.detail.get("topology", "")),
    )
