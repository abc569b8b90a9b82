"""MultiKueue dispatcher mode, part two: the pass that runs on the beat schedule.

One pass over one manager (a ``kind = "multikueue"`` cluster whose config has a
``dispatcher`` block): refresh the workers' inventory, read the manager's Workloads, and
for each one: adopt it (a broker workload, origin MultiKueue), nominate it when Kueue waits
for a nomination, replace a nomination that outlived the policy's admission time with the
next choice, follow admission, the end and deletion (quota released, usage recorded).

Everything is decided from what the manager shows at the start of the pass, so the pass is
idempotent: running it twice, or again after a crash, changes nothing that the first run
finished and finishes what it did not.  A manager that does not answer is marked stale and
nothing changes: its Workloads stay pending (MultiKueue waits) until the broker is back.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction

from broker.backends.base import DestinationJob, JobState, Unavailable, UsageRecord
from broker.backends.kube.dispatcher import (
    ManagerView,
    ManagerWorkload,
    MultiKueueDispatcherClient,
)
from broker.backends.kube.factory import kube_config
from broker.backends.registry import backend_config, resolve_credentials
from broker.lifecycle import TERMINAL_STATES
from broker.models import Cluster, Workload
from broker.models.workload import WorkloadOrigin
from broker.placement.record import MANAGER_LOOKUP, PlacementRecord
from broker.services.records import moves
from broker.services.dispatching import multikueue_nominate as nom
from broker.services.records.audit import audit
from broker.services.fleet.inventory import cluster_mark_stale, cluster_sync_inventory
from broker.services.following.status import workload_apply_status
from broker.services.quota.reservations import QuotaExceeded, reservation_release
from broker.services.records.transitions import Note
from broker import runtime
from accounting.services.usage import usage_ingest

log = logging.getLogger(__name__)


@dataclass
class DispatchReport:
    manager: str
    nominated: list[str] = field(default_factory=list)  # "ns/name -> worker,..."
    renominated: list[str] = field(default_factory=list)
    adopted: list[str] = field(default_factory=list)
    admitted: int = 0
    ended: int = 0
    deleted: int = 0
    waiting: dict[str, str] = field(default_factory=dict)  # ns/name -> why not nominated
    stale: str = ""


def dispatcher_client(manager: Cluster) -> MultiKueueDispatcherClient:
    cfg = {k: v for k, v in backend_config(manager).items() if k != "dispatcher"}
    conn = kube_config(cfg, resolve_credentials(manager.credentials_ref), settings.GPUBROKER_BACKEND_TIMEOUT_S)
    return MultiKueueDispatcherClient(conn, api_version=str(cfg.get("kueue_api_version", "v1beta2")))


def dispatcher_managers() -> list[int]:
    return [c.id for c in Cluster.objects.filter(kind="multikueue", enabled=True) if nom.dispatcher_config(c)]


def multikueue_dispatch(
    *, cluster_id: int, now: datetime | None = None, client: MultiKueueDispatcherClient | None = None
) -> DispatchReport:
    manager = Cluster.objects.get(id=cluster_id)
    cfg = nom.dispatcher_config(manager)
    report = DispatchReport(manager=manager.name)
    if cfg is None or not manager.enabled:
        return report
    if cfg.refresh_inventory:
        workers = Cluster.objects.filter(name__in=cfg.workers.values(), enabled=True)
        for worker_id in workers.values_list("id", flat=True):
            cluster_sync_inventory(cluster_id=worker_id)  # fresh numbers, or the worker goes stale
    own = client is None
    client = client or dispatcher_client(manager)
    try:
        view = client.view()
    except Unavailable as exc:
        cluster_mark_stale(cluster=manager, error=str(exc))
        report.stale = str(exc)
        return report
    finally:
        if own:
            client.close()
    now = now or runtime.now()
    seen = set()
    for wl in view.workloads:
        seen.add(wl.uid)
        try:
            _one(wl, view, cfg, manager, client, report, now)
        except nom.NotMapped as exc:
            report.waiting[wl.ref] = str(exc)
        except Unavailable as exc:
            report.waiting[wl.ref] = f"manager did not answer: {exc}"
    # only a Workload the manager no longer has at all is gone (not one merely between states)
    report.deleted = _gone(manager, seen | view.all_uids)
    return report


def _one(
    wl: ManagerWorkload,
    view: ManagerView,
    cfg: nom.DispatcherConfig,
    manager: Cluster,
    client: MultiKueueDispatcherClient,
    report: DispatchReport,
    now: datetime,
) -> None:
    if not wl.pod_sets or all(p.gpus_per_pod == 0 for p in wl.pod_sets):
        raise nom.NotMapped("asks for no GPUs")
    record = nom.ensure_record(wl, cfg, manager)
    if record.state in TERMINAL_STATES:
        return
    if wl.cluster_name and record.nominated_at is None:
        # a worker admitted a nomination this database has no record of (the broker died
        # after writing it, and the worker was quicker than the next pass): its quota is
        # held and its nomination recorded before its start is, as for one still waiting
        nom.adopt_nomination(record, replace(wl, nominated=wl.nominated or (wl.cluster_name,)), cfg, now=now)
        report.adopted.append(f"{wl.ref} -> {wl.cluster_name} (already admitted)")
        record.refresh_from_db()
    if wl.finished:
        report.ended += _ended(record, wl, cfg, manager)
    elif wl.cluster_name:
        report.admitted += _admitted(record, wl, cfg, manager)
    elif wl.nominable:
        _nominate_or_wait(record, wl, view, cfg, client, report, now)


def _nominate_or_wait(
    record: Workload,
    wl: ManagerWorkload,
    view: ManagerView,
    cfg: nom.DispatcherConfig,
    client: MultiKueueDispatcherClient,
    report: DispatchReport,
    now: datetime,
) -> None:
    placement = PlacementRecord.from_json(record.placement)
    if wl.nominated and placement.nominated_workers != tuple(wl.nominated):
        nom.adopt_nomination(record, wl, cfg, now=now)
        report.adopted.append(f"{wl.ref} -> {','.join(wl.nominated)}")
        return
    given_s = placement.admission_timeout_s
    timeout = timedelta(seconds=300.0 if given_s is None else given_s)
    if wl.nominated and record.nominated_at and now - record.nominated_at < timeout:
        return  # the nomination in force still has time
    skip = tuple(record.tried_clusters) if wl.nominated else ()
    decision = nom.rank_workers(record, view, cfg, now=now, skip=skip)
    if not decision.ranked:
        _no_worker(record, wl, decision, report)
        return
    action = "multikueue.renominated" if wl.nominated else "multikueue.nominated"
    try:
        workers = nom.nominate(record, wl, client, cfg, decision, now=now, action=action)
    except QuotaExceeded as exc:
        report.waiting[wl.ref] = str(exc)
        _note_wait(record, "policy", str(exc), decision)
        return
    if workers:
        (report.renominated if wl.nominated else report.nominated).append(f"{wl.ref} -> {','.join(workers)}")


def _no_worker(record: Workload, wl: ManagerWorkload, decision: PlacementRecord, report: DispatchReport) -> None:
    """No worker takes it now.  A nomination in force stays (withdrawing it would leave
    the Workload with none); a Workload without one waits for the next pass."""
    why = decision.excluded_summary()[:2000] or decision.reason
    report.waiting[wl.ref] = why
    if not wl.nominated:
        _note_wait(record, decision.reason or "capacity", why, decision)


def _note_wait(record: Workload, reason: str, raw: str, decision: PlacementRecord) -> None:
    if (record.reason, record.raw_reason) == (reason, raw):
        return
    with transaction.atomic():
        Workload.objects.filter(id=record.id).exclude(state__in=TERMINAL_STATES).update(
            reason=reason,
            raw_reason=raw,
            placement=decision.over(PlacementRecord.from_json(record.placement)).to_json(),
            policy_version=decision.policy_version,
        )
        audit(
            action="multikueue.waiting",
            workload=record,
            policy_version=decision.policy_version,
            message=f"{reason}: {raw}",
            inputs={"excluded": decision.excluded_json()},
        )


def _worker_cluster(cfg: nom.DispatcherConfig, mk_name: str) -> Cluster | None:
    return Cluster.objects.filter(name=cfg.workers.get(mk_name, "")).first()


def _at_worker(record: Workload, wl: ManagerWorkload, cfg: nom.DispatcherConfig, manager: Cluster) -> Workload:
    """Record where the Workload runs: the worker's broker cluster (the manager itself when
    that worker is not registered here) and the worker's job name, once: a later pass over
    the same admitted Workload writes nothing."""
    named = record.destination_job_id or not wl.job_name
    if record.worker_cluster == wl.cluster_name and record.cluster_id and named:
        return record
    cluster = _worker_cluster(cfg, wl.cluster_name) or manager
    fields: dict[str, object] = {"cluster": cluster, "worker_cluster": wl.cluster_name}
    if wl.job_name and not record.destination_job_id:
        fields["destination_job_id"] = f"{wl.namespace}/{wl.job_name}"
    try:
        with transaction.atomic():
            Workload.objects.filter(id=record.id).update(**fields)
    except IntegrityError:  # an older record holds that job name on that worker
        fields.pop("destination_job_id", None)
        Workload.objects.filter(id=record.id).update(**fields)
    record.refresh_from_db()
    return record


def _admitted(record: Workload, wl: ManagerWorkload, cfg: nom.DispatcherConfig, manager: Cluster) -> int:
    """A worker admitted it: running there from Kueue's admission time, through the one
    status path every backend's poll takes (``workload_apply_status``)."""
    record = _at_worker(record, wl, cfg, manager)
    job = DestinationJob(
        job_id=record.destination_job_id or wl.ref,
        workload_id=record.uid,
        state=JobState.RUNNING,
        raw_reason=f"admitted by {wl.cluster_name}",
        started_at=wl.admitted_at,
        worker_cluster=wl.cluster_name,
    )
    return workload_apply_status(workload=record, job=job)


def _ended(record: Workload, wl: ManagerWorkload, cfg: nom.DispatcherConfig, manager: Cluster) -> int:
    if wl.cluster_name:
        record = _at_worker(record, wl, cfg, manager)
    ended = wl.finished_at or runtime.now()
    started = record.started_at or wl.admitted_at
    job = DestinationJob(
        job_id=record.destination_job_id or wl.ref,
        workload_id=record.uid,
        state=JobState.COMPLETED if wl.succeeded else JobState.FAILED,
        raw_reason=wl.finish_message[:4000],
        started_at=started,
        ended_at=ended,
        worker_cluster=wl.cluster_name,
        run_s=max(0.0, (ended - started).total_seconds()) if started else None,
    )
    moved = workload_apply_status(workload=record, job=job)  # releases the quota as it ends
    if moved and started and record.cluster is not None and record.cluster.id != manager.id:
        _record_usage(record, record.cluster, wl, started, ended)
    return moved


def _record_usage(record: Workload, worker: Cluster, wl: ManagerWorkload, start: datetime, end: datetime) -> None:
    """Chargeback reads the usage ledger: the worker ran it, the manager's Workload says
    for how long.  Keyed like the worker's own usage report, so collecting both adds nothing."""

    gpus = record.total_gpus
    model = (record.spec.get("gpu_models") or [""])[0]
    usage_ingest(
        cluster=worker,
        records=[
            UsageRecord(
                source="kueue",
                cluster=worker.name,
                job_id=record.destination_job_id or wl.ref,
                workload_id=record.uid,
                account=wl.namespace,
                gpu_model=model,
                gpus=gpus,
                start=start,
                end=end,
                gpu_seconds=int((end - start).total_seconds()) * gpus,
                state="Finished",
            )
        ],
    )


def _gone(manager: Cluster, seen: set[str]) -> int:
    """Records whose Workload the manager no longer has: deleted there, so ended here."""
    live = (
        Workload.objects.filter(origin=WorkloadOrigin.MULTIKUEUE, **{MANAGER_LOOKUP: manager.name})
        .exclude(state__in=TERMINAL_STATES)
        .exclude(uid__in=seen)
    )
    count = 0
    for record in live:

        def release(r: Workload = record) -> object:
            return reservation_release(workload=r, reason="MultiKueue Workload deleted")

        count += moves.gone_at_manager(
            pk=record.id,
            fields={"ended_at": runtime.now(), "raw_reason": "the Workload was deleted on the MultiKueue manager"},
            then=release,
            note=Note(
                action="workload.cancelled",
                workload=record,
                cluster=manager.name,
                message=f"{record.external_ref} deleted on {manager.name}",
            ),
        )
    return count
