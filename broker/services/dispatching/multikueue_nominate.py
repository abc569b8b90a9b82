"""MultiKueue dispatcher mode, part one: from a manager Workload to a nomination.

A pending Workload on the manager becomes a broker workload (origin MultiKueue, the Kueue
UID as its uid), its pod sets become a spec, the placement library ranks the manager's
worker clusters (each registered in the broker as its own cluster, with its price, data
locations and freshness), the tenant's global quota is reserved, and the best worker (or
the policy's short list) is written into the Workload's ``status.nominatedClusterNames``.

Order of writes, for crash safety: one database transaction holds the reservation, the
record of the nomination and its audit; the nomination is applied to the manager inside
it, last.  Dying before the apply leaves nothing anywhere; dying after it leaves the
nomination on the manager and nothing here, and the next pass adopts what it finds
(never nominating a second time).  The apply carries the Workload's resourceVersion, so
it can never replace a nomination it did not see.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from django.db import IntegrityError, transaction

from broker.backends.kube.dispatcher import (
    ManagerView,
    ManagerWorkload,
    MultiKueueDispatcherClient,
    PodSetAsk,
)
from broker.failpoints import failpoint
from broker.models import (
    Cluster,
    ClusterHealth,
    GpuClass,
    Reservation,
    Workload,
    WorkloadState,
)
from broker.models.quota import LIVE_RESERVATION_STATES
from broker.models.workload import WorkloadOrigin
from broker.placement import Exclusion, PreparedFleet, place_prepared
from broker.placement.record import Nomination, PlacementRecord
from broker.services.records.audit import audit
from broker.services.placing.fleet_view import fleet_inputs
from broker.services.fleet.policy import current_policy
from broker.services.quota.reservations import (
    QuotaExceeded,
    quota_use,
    reservation_confirm,
    reservation_create,
)
from broker.spec import SpecError, validate_spec
from portal.tenancy.models import Project


@dataclass(frozen=True)
class DispatcherConfig:
    """``Cluster.config["dispatcher"]`` of a MultiKueue manager in dispatcher mode."""

    name: str
    workers: Mapping[str, str]  # MultiKueueCluster name -> broker cluster name
    queues: Mapping[str, Mapping[str, str]]  # "namespace/localqueue" -> {project, gpu_class}
    priorities: Mapping[str, str]  # Kueue priority class -> broker priority
    model_names: Mapping[str, str]  # node product label -> broker model name
    refresh_inventory: bool = True

    @property
    def by_broker_name(self) -> dict[str, str]:
        return {broker: mk for mk, broker in self.workers.items()}


class NotMapped(Exception):
    """The Workload's queue or GPU ask has no broker mapping: it is left to wait."""


class _Changed(Exception):
    """The manager's Workload changed since it was read: nothing is recorded."""


def dispatcher_config(cluster: Cluster) -> DispatcherConfig | None:
    raw = (cluster.config or {}).get("dispatcher")
    if not raw:
        return None
    return DispatcherConfig(
        name=str(raw.get("name", "gpubroker.io/dispatcher")),
        workers=dict(raw.get("workers") or {}),
        queues={str(k): dict(v) for k, v in (raw.get("queues") or {}).items()},
        priorities=dict(raw.get("priorities") or {}),
        model_names=dict(raw.get("model_names") or {}),
        refresh_inventory=bool(raw.get("refresh_inventory", True)),
    )


def _gpu_ask(wl: ManagerWorkload) -> PodSetAsk:
    gpu_sets = [p for p in wl.pod_sets if p.gpus_per_pod > 0]
    if not gpu_sets:
        raise NotMapped("asks for no GPUs")
    widest = max(gpu_sets, key=lambda p: p.gpus_per_pod)
    return PodSetAsk(
        name=widest.name,
        count=sum(p.count for p in gpu_sets),
        gpus_per_pod=widest.gpus_per_pod,
        gpu_resource=widest.gpu_resource,
        node_selector=widest.node_selector,
        tolerations=widest.tolerations,
    )


def _spec_name(name: str) -> str:
    cleaned = "".join(ch if ch.isalnum() or ch == "-" else "-" for ch in name.lower())[:52].strip("-")
    return cleaned or "multikueue"


def build_spec(wl: ManagerWorkload, cfg: DispatcherConfig) -> tuple[Project, GpuClass, dict[str, object]]:
    """The broker's spec of a manager Workload: GPUs per pod and pods from the pod sets,
    models from the product node selector, priority through the configured classes, the
    project (hence tenant) and default GPU class from the queue mapping."""
    queue = cfg.queues.get(wl.queue_key)
    if queue is None:
        raise NotMapped(f"queue {wl.queue_key} has no project in the dispatcher's queue mapping")
    project = Project.objects.select_related("tenant").filter(slug=queue.get("project", "")).first()
    if project is None:
        raise NotMapped(f"queue {wl.queue_key}: project {queue.get('project')!r} does not exist")
    ask = _gpu_ask(wl)
    product = ask.gpu_product
    model = cfg.model_names.get(product, product)
    # the queue's class when it serves the product; else the first class that does
    gpu_class = GpuClass.objects.filter(slug=queue.get("gpu_class", "")).first()
    if model and (gpu_class is None or model not in (gpu_class.gpu_models or [])):
        gpu_class = next((c for c in GpuClass.objects.all() if model in (c.gpu_models or [])), None)
    if gpu_class is None:
        raise NotMapped(f"queue {wl.queue_key}: no GPU class for product {product!r}")
    spec: dict[str, object] = {
        "project": project.slug,
        "name": _spec_name(wl.name),
        "command": f"(MultiKueue Workload {wl.ref})",
        "gpus_per_worker": ask.gpus_per_pod,
        "workers": ask.count,
        "gpu_class": gpu_class.slug,
        "gpu_models": [model] if model else [],
        "mig_profile": ask.mig_profile,
        "priority": cfg.priorities.get(wl.priority_class, "normal"),
        "data_location": wl.data_location,
        "data_size_gb": wl.data_size_gb,
    }
    try:
        validate_spec(spec)
    except SpecError as exc:
        raise NotMapped(f"its pod sets make no valid spec: {exc}") from exc
    return project, gpu_class, spec


def ensure_record(wl: ManagerWorkload, cfg: DispatcherConfig, manager: Cluster) -> Workload:
    """The broker's workload for a manager Workload, made once (the UID is unique)."""
    found = Workload.objects.filter(uid=wl.uid).first()
    if found is not None:
        return found
    project, gpu_class, spec = build_spec(wl, cfg)
    shape = validate_spec(spec)  # (valid: build_spec checked it)
    try:
        with transaction.atomic():
            record = Workload.objects.create(
                uid=wl.uid,
                origin=WorkloadOrigin.MULTIKUEUE,
                external_ref=wl.ref,
                tenant=project.tenant,
                project=project,
                name=wl.name[:63],
                spec=spec,
                gpu_class=gpu_class,
                total_gpus=shape.gpus_per_worker * shape.workers,
                state=WorkloadState.QUEUED,
                reason="other",
                raw_reason="pending on the MultiKueue manager",
                placement=PlacementRecord(manager=manager.name).to_json(),
            )
            audit(
                action="multikueue.adopted",
                workload=record,
                cluster=manager.name,
                message=f"MultiKueue Workload {wl.ref} (uid {wl.uid}) on {manager.name}",
                inputs={
                    "pod_sets": [p.__dict__ for p in wl.pod_sets],
                    "queue": wl.queue_key,
                    "priority_class": wl.priority_class,
                },
            )
            return record
    except IntegrityError:
        return Workload.objects.get(uid=wl.uid)  # another pass made it first


def _worker_exclusions(
    view: ManagerView, cfg: DispatcherConfig, clusters: Mapping[str, Cluster]
) -> dict[str, Exclusion]:
    """Workers the manager cannot reach, or whose inventory is not fresh, are out: a stale
    worker is never nominated (stale is not idle)."""
    out: dict[str, Exclusion] = {}
    for mk_name, broker_name in cfg.workers.items():
        cluster = clusters.get(broker_name)
        if cluster is None or not cluster.enabled:
            out[broker_name] = Exclusion("health", f"MultiKueue worker {mk_name} is not registered or disabled")
        elif mk_name in view.inactive_workers or mk_name not in view.active_workers:
            why = view.inactive_workers.get(mk_name, "no MultiKueueCluster of that name")
            out[broker_name] = Exclusion("stale", f"MultiKueue reports {mk_name} inactive: {why}")
        elif cluster.health != ClusterHealth.HEALTHY:
            out[broker_name] = Exclusion(
                "stale", f"inventory not fresh ({cluster.health}): {cluster.last_error[:200]}; stale is not idle"
            )
    return out


def rank_workers(
    record: Workload, view: ManagerView, cfg: DispatcherConfig, *, now: datetime, skip: tuple[str, ...] = ()
) -> PlacementRecord:
    """The placement library over the manager's workers only; returns the decision record."""
    loaded = current_policy()
    spec = validate_spec(record.spec)
    workers = set(cfg.workers.values())
    clusters = {c.name: c for c in Cluster.objects.filter(name__in=workers)}
    snapshots, facts, forced = fleet_inputs(rejections={}, now=now)
    forced = {k: v for k, v in forced.items() if k in workers}
    forced.update(_worker_exclusions(view, cfg, clusters))
    for name in skip:
        forced.setdefault(name, Exclusion("rejected", "did not admit it within the policy's admission time"))
    snapshots = [s for s in snapshots if s.cluster in workers and s.cluster not in forced]
    facts = {k: v for k, v in facts.items() if k in workers}
    use = quota_use(tenant_id=record.tenant_id, gpu_class_id=int(record.gpu_class_id or 0))
    result = place_prepared(
        PreparedFleet(snapshots, facts, loaded.policy),
        spec,
        tenant=record.tenant.slug,
        quota_remaining=use.remaining + _held(record),
        now=now,
        age_s=(now - record.created_at).total_seconds(),
        holder=record.uid,
    )
    excluded = {**result.excluded, **forced}
    ranked = [c for c in result.ranked if c.cluster not in forced]
    return PlacementRecord.decided(
        result,
        policy_version=loaded.version,
        ranked=ranked,
        excluded=excluded,
        manager=PlacementRecord.from_json(record.placement).manager,
        quota_remaining=use.remaining,
        nominate=loaded.policy.multikueue.nominate,
        admission_timeout_s=loaded.policy.multikueue.admission_timeout_s,
    )


def _held(record: Workload) -> int:
    """GPUs this workload already holds: a renomination moves them, it does not add them."""
    return record.total_gpus if record.reservations.filter(state__in=("active", "confirmed")).exists() else 0


def write_nomination(client: MultiKueueDispatcherClient, wl: ManagerWorkload, workers: list[str]) -> bool:
    """The one write to the manager (the failpoints multikueue.before_nominate and
    multikueue.after_nominate sit on either side of it in ``nominate``)."""
    return client.nominate(wl, workers)


def nominate(
    record: Workload,
    wl: ManagerWorkload,
    client: MultiKueueDispatcherClient,
    cfg: DispatcherConfig,
    decision: PlacementRecord,
    *,
    now: datetime,
    action: str = "multikueue.nominated",
) -> list[str]:
    """Reserve, record and apply the nomination of ``decision``'s best workers (atomic);
    returns the nominated MultiKueue worker names, empty when the Workload changed meanwhile."""
    chosen = decision.ranked[: max(1, decision.nominate or 1)]
    mk_names = [cfg.by_broker_name[c.cluster] for c in chosen]
    decision = decision.nominating(
        chosen,
        Nomination(
            workers=tuple(mk_names), clusters=tuple(c.cluster for c in chosen), at=now, previous=tuple(wl.nominated)
        ),
    )
    first = Cluster.objects.get(name=chosen[0].cluster)
    tried = sorted(set(record.tried_clusters) | {c.cluster for c in chosen})
    try:
        with transaction.atomic():
            reservation_create(workload=record, cluster=first, ttl_s=int(current_policy().policy.reservation_ttl_s))
            reservation_confirm(workload=record, cluster=first)  # the manager holds the Workload
            Reservation.objects.filter(workload=record, state__in=LIVE_RESERVATION_STATES).update(cluster=first)
            Workload.objects.filter(id=record.id).update(
                # dispatched_at: counted as promised on its nodes until an inventory shows it
                cluster=first,
                worker_cluster=mk_names[0],
                nominated_at=now,
                dispatched_at=now,
                placement=decision.to_json(),
                policy_version=decision.policy_version,
                tried_clusters=tried,
                reason="other",
                raw_reason=f"nominated to {', '.join(mk_names)}; waiting for the worker to admit it",
            )
            audit(
                action=action,
                workload=record,
                policy_version=decision.policy_version,
                cluster=first.name,
                score_breakdown=chosen[0].to_json(),
                inputs={
                    "spec": record.spec,
                    "workers": mk_names,
                    "previous": list(wl.nominated),
                    "candidates": decision.candidates,
                    "excluded": decision.excluded_json(),
                    "kueue_workload": wl.ref,
                    "resource_version": wl.resource_version,
                },
                message=f"{wl.ref} -> {', '.join(mk_names)} (score {chosen[0].score:.3f})",
            )
            failpoint("multikueue.before_nominate")
            if not write_nomination(client, wl, mk_names):
                raise _Changed
            failpoint("multikueue.after_nominate")
    except _Changed:
        return []
    return mk_names


def adopt_nomination(record: Workload, wl: ManagerWorkload, cfg: DispatcherConfig, *, now: datetime) -> None:
    """The manager shows a nomination this database has no record of (the broker died after
    writing it): record it as it is, reserve its quota, restart its admission clock."""
    broker_names = [cfg.workers[n] for n in wl.nominated if n in cfg.workers]
    first = Cluster.objects.filter(name__in=broker_names[:1]).first()
    with transaction.atomic():
        if first is not None:
            try:
                reservation_create(workload=record, cluster=first, ttl_s=int(current_policy().policy.reservation_ttl_s))
                reservation_confirm(workload=record, cluster=first)
            except QuotaExceeded as exc:
                audit(action="multikueue.quota_over", workload=record, message=str(exc))
        nomination = Nomination(workers=tuple(wl.nominated), clusters=tuple(broker_names), at=now, adopted=True)
        placement = replace(PlacementRecord.from_json(record.placement), nomination=nomination).to_json()
        Workload.objects.filter(id=record.id).update(
            cluster=first,
            worker_cluster=wl.nominated[0],
            nominated_at=now,
            dispatched_at=now,
            placement=placement,
            tried_clusters=sorted(set(record.tried_clusters) | set(broker_names)),
            raw_reason=f"nominated to {', '.join(wl.nominated)}; waiting for the worker to admit it",
        )
        audit(
            action="multikueue.nomination_adopted",
            workload=record,
            cluster=first.name if first else "",
            message=f"{wl.ref} already nominated to {', '.join(wl.nominated)}: recorded, not renominated",
            inputs={"workers": list(wl.nominated)},
        )
