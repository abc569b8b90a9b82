"""Submitting and cancelling workloads: what a researcher can do to a job."""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from django.contrib.auth.models import User
from django.db import transaction

from accounting.services.budgets import hours_asked, standings_for_submission
from broker.models import Cluster, GpuClass, Workload
from broker.placement.budgets import Standing
from broker.lifecycle import TERMINAL_STATES
from broker.selectors.workloads import workload_get
from broker.services.fleet.policy import current_policy
from broker.services.records import tasks_bridge
from broker.services.records.audit import audit
from broker.services.quota.reservations import reservation_release
from broker.services.records import moves
from broker.services.records.transitions import Note
from broker.spec import SpecError, WorkloadSpec, validate_spec
from portal.identity.selectors import run_as_problem
from portal.tenancy.models import Project, Role, Tenant
from portal.tenancy.selectors import project_get
from broker import runtime

# States with nothing at any destination yet: a cancel ends them at once.


def resolve_gpu_class(spec: WorkloadSpec) -> GpuClass:
    if spec.gpu_class:
        gpu_class = GpuClass.objects.filter(slug=spec.gpu_class).first()
        if gpu_class is None:
            raise SpecError({"gpu_class": [f"unknown GPU class {spec.gpu_class!r}."]})
        return gpu_class
    for gpu_class in GpuClass.objects.all():
        if all(model in gpu_class.gpu_models for model in spec.gpu_models):
            return gpu_class
    raise SpecError(
        {
            "gpu_models": [
                f"no single GPU class contains all of {', '.join(spec.gpu_models)}; quota is counted per class."
            ]
        }
    )


def known_data_locations() -> set[str]:
    """The data locations the fleet file names (reachable or with a stated bandwidth)."""
    known: set[str] = set()
    for config in Cluster.objects.values_list("config", flat=True):
        config = config or {}
        known.update(config.get("data_locations", ()))
        known.update(config.get("bandwidth_gbps", {}))
    return known


def resolve_priority_class(spec: WorkloadSpec, tenant: str) -> WorkloadSpec:
    """A fleet priority class, when the spec names one: it must be the policy's and granted to
    the tenant, and it sets the spec's priority to its level."""
    if not spec.priority_class:
        return spec
    policy = current_policy().policy
    chosen = policy.priority_classes.get(spec.priority_class)
    if chosen is None:
        known = ", ".join(policy.priority_classes) or "none are defined"
        raise SpecError(
            {"priority_class": [f"unknown priority class {spec.priority_class!r}; the policy has {known}."]}
        )
    grant = policy.tenant(tenant).priority_classes
    if not policy.tenant(tenant).allows_priority_class(chosen.name):
        raise SpecError(
            {
                "priority_class": [
                    f"tenant {tenant} may not submit at priority class {chosen.name}; "
                    f"the policy grants {', '.join(grant) or 'none'}."
                ]
            }
        )
    if spec.priority not in ("normal", chosen.level):
        raise SpecError(
            {"priority": [f"priority class {chosen.name} is at level {chosen.level}; leave priority out or give that."]}
        )
    return replace(spec, priority=chosen.level)


def check_priority(spec: WorkloadSpec, tenant: str) -> None:
    """Who may submit at which priority is the policy's grant to each tenant (admins change
    it through a policy release)."""
    granted = current_policy().policy.tenant(tenant).priorities
    if spec.priority not in granted:
        allowed = ", ".join(granted) or "none"
        raise SpecError(
            {"priority": [f"tenant {tenant} may not submit at priority {spec.priority}; the policy grants {allowed}."]}
        )


def check_budgets(spec: WorkloadSpec, project: Project, gpu_class: GpuClass) -> list[Standing]:
    """The GPU-hour budgets the work counts against, its ask added; a hard one it would
    pass refuses it with the figures.  Called under the tenant's row lock on submission,
    so two submissions of one tenant never both take the last hours."""
    asked = hours_asked(gpus=spec.total_gpus, time_limit_minutes=spec.time_limit_minutes)
    standings = standings_for_submission(
        tenant=project.tenant, project=project, gpu_class=gpu_class.slug, asked_hours=asked
    )
    refused = [s.words() for s in standings if s.refuses]
    if refused:
        asks = f"{spec.workers} worker(s) x {spec.gpus_per_worker} GPU(s) x {spec.time_limit_minutes} min"
        raise SpecError(
            {"budget": [f"refused by the {w} ({asks}); a shorter time limit or fewer GPUs ask less." for w in refused]}
        )
    return standings


def check_data_location(spec: WorkloadSpec) -> None:
    """A misspelt location would otherwise count as remote everywhere and rank silently."""
    known = known_data_locations()
    if spec.data_location and spec.data_location not in known:
        choices = ", ".join(sorted(known)) or "none are configured"
        raise SpecError({"data_location": [f"unknown data location {spec.data_location!r}; known: {choices}."]})


def workload_submit(
    *, user: User, project_id: int, spec_data: Mapping[str, object], resubmit_of: Workload | None = None
) -> Workload:
    """Validate the spec and store the workload; placement runs after commit."""
    project = project_get(user=user, project_id=project_id, roles=(Role.RESEARCHER,))
    return _create(user=user, project=project, spec_data=spec_data, resubmit_of=resubmit_of)


@transaction.atomic
def _create(
    *, user: User | None, project: Project, spec_data: Mapping[str, object], resubmit_of: Workload | None
) -> Workload:
    spec = resolve_priority_class(validate_spec({**spec_data, "project": project.slug}), project.tenant.slug)
    gpu_class = resolve_gpu_class(spec)
    check_data_location(spec)
    check_priority(spec, project.tenant.slug)
    if problem := run_as_problem(project=project, user=user):
        raise SpecError({"project": [problem]})
    if current_policy().policy.budgets_for(tenant=project.tenant.slug, project=project.slug, gpu_class=gpu_class.slug):
        Tenant.objects.select_for_update().filter(id=project.tenant_id).first()
    standings = check_budgets(spec, project, gpu_class)
    workload = Workload.objects.create(
        tenant_id=project.tenant_id,
        project=project,
        submitted_by=user if getattr(user, "pk", None) else None,
        name=spec.name,
        spec=spec.to_dict(),
        gpu_class=gpu_class,
        total_gpus=spec.total_gpus,
        resubmit_of=resubmit_of,
    )
    audit(
        action="workload.submitted",
        workload=workload,
        actor=user,
        message=f"{spec.workers} worker(s) x {spec.gpus_per_worker} {gpu_class.slug} GPU(s)",
        inputs={"spec": spec.to_dict()},
    )
    for standing in standings:
        if standing.warns:
            audit(action="budget.warned", workload=workload, actor=user, message=standing.words())
    tasks_bridge.enqueue_place(workload.id)
    return workload


def workload_cancel(*, user: User, workload_id: int) -> Workload:
    """Store the cancellation first; propagation is retried until the destination confirms."""
    workload = workload_get(user=user, workload_id=workload_id)
    return cancel_request(workload=workload, actor=user)


@transaction.atomic
def cancel_request(*, workload: Workload, actor: User | None = None) -> Workload:
    now = runtime.now()
    live = Workload.objects.filter(id=workload.id).exclude(state__in=TERMINAL_STATES)
    if not live.filter(cancel_requested_at__isnull=True).update(cancel_requested_at=now):
        return Workload.objects.get(id=workload.id)  # already ended or already cancelling
    audit(action="cancel.requested", workload=workload, actor=actor)
    ended = moves.cancel_requested(
        dispatched=False,
        pk=workload.id,
        fields={"ended_at": now},
        then=lambda: reservation_release(workload=workload, reason="cancelled before dispatch"),
        note=Note(action="workload.cancelled", workload=workload, message="cancelled before dispatch"),
    )
    # cancel.requested above is the record of the move to cancelling
    if not ended and moves.cancel_requested(dispatched=True, pk=workload.id, note=None):
        tasks_bridge.enqueue_cancel(workload.id)
    return Workload.objects.get(id=workload.id)


def spec_of(workload: Workload) -> WorkloadSpec:
    return validate_spec(workload.spec)
