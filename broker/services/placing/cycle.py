"""Placement as a service: read the fleet from the database, ask the pure placement
library, reserve quota on the best candidate and hand the workload to dispatch.

The library decides; this module only gathers its inputs and records the decision
(policy version, inputs, chosen cluster, score breakdown) in the audit trail.
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass, field
from decimal import Decimal
from datetime import datetime
from typing import Callable, Mapping, TypedDict

from django.db import transaction

from accounting.models import CloudTcoReading
from broker.lifecycle import PLACEABLE_STATES
from broker.models import Cluster, Location, Workload, WorkloadState
from broker.models.workload import LocalReason
from broker.placement import Candidate, Exclusion, PlacementResult, PreparedFleet, place_prepared
from broker.placement.fairness import should_hold_for_gang
from broker.placement.off_peak import next_opening
from broker.placement.record import RETRY_AT_LOOKUP, RETRY_SINCE_LOOKUP, PlacementRecord
from broker.selectors.run_times import runtime_hours_for
from broker.services.records import moves
from broker.services.records import tasks_bridge
from broker.services.placing.gang_holds import apply_holds, hold_for_gang, release_holds
from broker.services.placing.bursting import (
    MonthSpend,
    burst_gate,
    first_prediction,
    learned_waits,
    location_of,
    month_spend_committed,
    onprem_tco_month,
)
from broker.services.placing.due import QueueRow, due_ids
from broker.services.placing.queueing import queue_choice
from broker.services.placing.fleet_view import fleet_inputs, identity_scopes
from broker.services.placing.writes import PassWriter, decided_note, decision_for
from broker.services.notifying.deliveries import notify_on_commit
from broker.services.fleet.policy import LoadedPolicy, current_policy
from broker.services.quota.reservations import QuotaExceeded, QuotaUse, quota_use, reservation_create
from broker.services.records.transitions import Note
from broker.spec import validate_spec
from portal.metrics.readings import cloud_tco_crossed
from broker.placement.wait_estimator import WaitEstimator
from broker import runtime

PLACEABLE = PLACEABLE_STATES
# Exclusions that waiting will not change: the workload is rejected when every
# cluster is out for one of these.
PERMANENT_RULES = {
    "policy",
    "gpu_compat",
    "gpu_memory",
    "partitioning",
    "residency",
    "data_access",
    "rejected",
    "local_limit",
    "never_fits",
}


# A workload that found no place is looked at again by ``place_waiting`` after a pause
# that doubles with each fruitless try, up to the cap: a long queue is not re-ranked in
# full every 10 s.  Placement on an event (a submission, a destination's refusal) does not wait.
RETRY_FIRST_S = 10.0
RETRY_CAP_S = 120.0
# Workloads one pass looks at (oldest due first): a pass reads the fleet and the waiting
# queue once (about half a second on 20 clusters and a queue of 10,000), so a longer pass
# spends less of a worker on reading; 1,000 placements take a few seconds, well inside
# the task's time limit, and are written in chunks (placing_writes.CHUNK).
PASS_LIMIT = 1000
# a row of the waiting queue: id, created, GPU class, GPUs, origin, cancel requested, retry at


class _LostRace(Exception):
    pass


class PlacementAsk(TypedDict):
    """What placement is asked for one workload, beside its spec and the fleet: the keyword
    arguments ``place_prepared`` and ``queue_candidates`` share."""

    tenant: str
    quota_remaining: int
    now: datetime
    age_s: float
    runtime_hours: float | None
    cloud_quota_remaining: int | None
    scopes: tuple[str, ...]


@dataclass
class PlacingPass:
    """What every workload placed in one pass shares, read once: the policy, the prepared
    fleet with its holds, the stale clusters, the learned waits; quota use and run-time
    history once per tenant and project.  Each placement books its GPUs in the fleet and
    the quota use here, so later workloads of the pass are not sent onto them."""

    now: datetime
    loaded: LoadedPolicy
    fleet: PreparedFleet
    forced: dict[str, Exclusion]
    estimator: WaitEstimator
    uses: dict[tuple[int, int | None], QuotaUse] = field(default_factory=dict)
    runtimes: dict[tuple[int, int | None], float | None] = field(default_factory=dict)
    # the waiting queue as the pass read it (created_at, id, gpu class, GPUs), and the ids
    # that left it during the pass: what "GPUs queued ahead" counts, without a query each
    queue: list[tuple[datetime, int, int, int]] = field(default_factory=list)
    left: set[int] = field(default_factory=set)
    month_spend: MonthSpend | None = None  # cloud spend, on-prem TCO: read at first need
    # tenants whose cloud spend passed the policy's share of on-prem TCO: read at first need
    month_crossed: Mapping[int, CloudTcoReading] | None = None
    # a pass read the waiting queue (placing_pass_open); a batch of one did not, so it knows
    # neither the GPUs queued ahead nor whether bursting is worth its spend
    queue_read: bool = False
    rejections: dict[str, str] = field(default_factory=dict)  # destinations the fleet leaves out
    writer: PassWriter | None = None  # set: decisions to place are written in chunks (placing_writes)
    # GPUs this pass sent to wait in each cluster's queue (queueing.turnover_s counts them)
    sent_to_queue: dict[str, int] = field(default_factory=dict)

    def tco_crossed(self) -> Mapping[int, CloudTcoReading]:
        if self.month_crossed is None:
            self.month_crossed = cloud_tco_crossed(self.now)
        return self.month_crossed

    def spend(self) -> MonthSpend:
        if self.month_spend is None:
            self.month_spend = (month_spend_committed(self.now), onprem_tco_month())
        return self.month_spend

    def ahead(self, workload: Workload) -> Callable[[], int]:
        return lambda: sum(
            gpus
            for created, wid, cls, gpus in self.queue
            if cls == workload.gpu_class_id
            and created < workload.created_at
            and wid != workload.id
            and wid not in self.left
        )

    def quota(self, workload: Workload) -> QuotaUse:
        key = (workload.tenant_id, workload.gpu_class_id)
        if key not in self.uses:
            self.uses[key] = quota_use(tenant_id=workload.tenant_id, gpu_class_id=workload.gpu_class_id)
        return self.uses[key]

    def runtime(self, workload: Workload) -> float | None:
        key = (workload.project_id, workload.gpu_class_id)
        if key not in self.runtimes:
            self.runtimes[key] = runtime_hours_for(project_id=workload.project_id, gpu_class_id=workload.gpu_class_id)
        return self.runtimes[key]

    def ask(self, workload: Workload, *, moving: bool = False) -> PlacementAsk:
        """The workload's ask in this pass: its tenant's quota left (with its own GPUs when
        it is ``moving``: they move with it), its age, expected run time and scopes."""
        use, own = self.quota(workload), workload.total_gpus if moving else 0
        burst = self.fleet.policy.tenant(workload.tenant.slug).burst_gpus
        return PlacementAsk(
            tenant=workload.tenant.slug,
            quota_remaining=use.remaining + own,
            now=self.now,
            age_s=(self.now - workload.created_at).total_seconds(),
            runtime_hours=self.runtime(workload),
            cloud_quota_remaining=(use.remaining_with(burst) + own) if burst else None,
            scopes=identity_scopes(workload.project),
        )

    def booked(self, workload: Workload, best: Candidate) -> None:
        self.fleet.take(best)
        self.fleet.release(workload.uid)
        if self.month_spend is not None and location_of(self.fleet, best.cluster) == Location.CLOUD:
            # its expected cost counts against its tenant's budget for the rest of the pass
            key = (workload.tenant_id, best.cluster)
            self.month_spend[0][key] = self.month_spend[0].get(key, Decimal("0")) + Decimal(
                str(best.breakdown["gpu_cost"])
            )
        use = self.quota(workload)
        self.uses[(workload.tenant_id, workload.gpu_class_id)] = QuotaUse(
            limit=use.limit, borrow=use.borrow, used=use.used + workload.total_gpus
        )


def placing_pass_prepare(*, now: datetime, rejections: dict[str, str] | None = None) -> PlacingPass:
    loaded = current_policy()
    snapshots, facts, forced = fleet_inputs(rejections=rejections or {}, now=now)
    fleet = PreparedFleet(snapshots, facts, loaded.policy)
    apply_holds(fleet)
    return PlacingPass(
        now=now,
        loaded=loaded,
        fleet=fleet,
        forced=forced,
        estimator=learned_waits(now=now, policy=loaded.policy),
        rejections=dict(rejections or {}),
    )


def workload_place(*, workload_id: int, now: datetime | None = None) -> Workload:
    """Place one workload (on its submission, after a refusal): a batch of one, through the
    same cycle as the pass (``place_in_pass``), on a fleet prepared for it alone."""
    workload = Workload.objects.select_related("tenant", "project", "gpu_class").get(id=workload_id)
    if not _placeable(workload):
        return workload  # nothing to place: no fleet is read for it
    rejections = _rejections(workload, PlacementRecord.from_json(workload.placement))
    return place_in_pass(placing_pass_prepare(now=now or runtime.now(), rejections=rejections), workload)


def _placeable(workload: Workload) -> bool:
    # (a MultiKueue workload is placed by broker.services.dispatching.multikueue)
    return workload.state in PLACEABLE and not workload.cancel_requested_at and workload.origin == "broker"


def _rejections(workload: Workload, prior: PlacementRecord) -> dict[str, str]:
    """The destinations that refused it, with their reasons (from its stored record): its
    fleet leaves them out."""
    return {name: prior.rejections.get(name, "rejected") for name in workload.tried_clusters}


def place_one(workload: Workload, cycle: PlacingPass) -> Workload:
    """Place one workload of a cycle, on its shared inputs (a workload that a destination
    refused sees the fleet without that destination: it gets its own)."""
    if not _placeable(workload):
        return workload
    now = cycle.now
    prior = PlacementRecord.from_json(workload.placement)
    rejections = _rejections(workload, prior)
    ctx = cycle if rejections == cycle.rejections else placing_pass_prepare(now=now, rejections=rejections)
    in_queue = ctx is cycle and cycle.queue_read  # the figures of the queue ahead are known
    loaded, fleet, forced = ctx.loaded, ctx.fleet, ctx.forced
    spec = validate_spec(workload.spec)
    use, ask = ctx.quota(workload), ctx.ask(workload)
    age_s = ask["age_s"]
    result = place_prepared(fleet, spec, **ask, holder=workload.uid)
    excluded = {**result.excluded, **forced}
    ranked = [c for c in result.ranked if c.cluster not in forced]
    estimator = ctx.estimator
    ahead = cycle.ahead(workload) if in_queue else None
    gate = burst_gate(
        workload=workload,
        ranked=ranked,
        fleet=fleet,
        spec=spec,
        now=now,
        estimator=estimator,
        ahead_gpus=ahead,
        spend=cycle.spend if in_queue else None,
        crossed=cycle.tco_crossed if in_queue else None,
    )
    ranked = gate.ranked
    if not ranked and (result.reason == LocalReason.CAPACITY or gate.held_back):
        queued = queue_choice(workload=workload, ctx=ctx, spec=spec, age_s=age_s, in_queue=in_queue)
        if queued is not None:
            ranked = [queued]
            ctx.sent_to_queue[queued.cluster] = ctx.sent_to_queue.get(queued.cluster, 0) + spec.total_gpus
    record = PlacementRecord.decided(
        result,
        policy_version=loaded.version,
        ranked=ranked,
        excluded=excluded,
        quota_remaining=use.remaining,
        rejections=rejections,
        burst=gate.held_back,
        onprem_wait_s=gate.onprem_wait_s,
        predicted_wait_s=first_prediction(
            workload=workload, ranked=ranked, fleet=fleet, spec=spec, now=now, estimator=estimator, ahead_gpus=ahead
        ),
    )
    if not ranked and gate.held_back:
        return _wait(workload, _with_retry(record, prior, now), LocalReason.CAPACITY, gate.held_back, loaded.version)
    if not ranked:
        if result.reason == LocalReason.CAPACITY and should_hold_for_gang(spec, age_s, loaded.policy.aging):
            hold_for_gang(workload, fleet, spec, now)
        opens = next_opening(fleet.off_peak_closed(spec, now))
        return _no_place(workload, _with_retry(record, prior, now, opens), excluded, result, loaded.version)
    if ctx is cycle and cycle.writer is not None:  # written with its chunk
        cycle.writer.add(decision_for(workload, ranked[0], record.choosing(ranked[0]), loaded, use.remaining))
        cycle.left.add(workload.id)
        with suppress(KeyError):
            cycle.booked(workload, ranked[0])
        return workload
    try:
        placed = _reserve_and_dispatch(workload, ranked[0], record, loaded, use.remaining)
    except QuotaExceeded as exc:
        return _wait(workload, _with_retry(record, prior, now), LocalReason.POLICY, str(exc), loaded.version)
    except _LostRace:
        return Workload.objects.get(id=workload.id)
    with suppress(KeyError):  # (placed on its own fleet too: the cycle's must not offer those GPUs again)
        cycle.booked(workload, ranked[0])
    return placed


def _with_retry(
    record: PlacementRecord, prior: PlacementRecord, now: datetime, opens: datetime | None = None
) -> PlacementRecord:
    """The record with when ``place_waiting`` should look again (see RETRY_FIRST_S), no
    later than ``opens``: the next off-peak window's opening, where it waits for one."""
    return record.retrying(earlier=prior.retry, now=now, first_s=RETRY_FIRST_S, cap_s=RETRY_CAP_S, until=opens)


@transaction.atomic
def _reserve_and_dispatch(
    workload: Workload, best: Candidate, record: PlacementRecord, loaded: LoadedPolicy, quota_remaining: int
) -> Workload:
    cluster = Cluster.objects.get(name=best.cluster)
    placement = record.choosing(best)
    reservation_create(
        workload=workload,
        cluster=cluster,
        ttl_s=int(loaded.policy.reservation_ttl_s),
        burst_gpus=loaded.policy.tenant(workload.tenant.slug).burst_gpus,
    )
    if not moves.reserve(
        pk=workload.id,
        where={"cancel_requested_at__isnull": True},
        fields={
            "cluster": cluster,
            "placement": placement.to_json(),
            "policy_version": loaded.version,
            "reason": "",
            "raw_reason": "",
        },
        then=lambda: release_holds(workload_uid=workload.uid),
        note=decided_note(workload, best, placement, loaded.version, quota_remaining),
    ):
        raise _LostRace  # rolls the reservation back with it
    tasks_bridge.enqueue_dispatch(workload.id)
    return Workload.objects.get(id=workload.id)


def _summary(excluded: dict[str, Exclusion]) -> str:
    return "; ".join(f"{name}: {e.message}" for name, e in sorted(excluded.items()))[:4000]


def _no_place(
    workload: Workload, record: PlacementRecord, excluded: dict[str, Exclusion], result: PlacementResult, version: str
) -> Workload:
    permanent = bool(excluded) and all(e.rule in PERMANENT_RULES for e in excluded.values())
    if permanent:
        return _reject(workload, record, _summary(excluded), version)
    return _wait(workload, record, result.reason or LocalReason.CAPACITY, _summary(excluded), version)


@transaction.atomic
def _wait(workload: Workload, record: PlacementRecord, reason: str, raw: str, version: str) -> Workload:
    changed = (workload.reason, workload.raw_reason) != (reason, raw)
    # looked again with nothing new to say: the state is written, no record
    note = (
        Note(
            action="placement.waiting",
            workload=workload,
            policy_version=version,
            message=f"{reason}: {raw}",
            inputs={"excluded": record.excluded_json()},
        )
        if changed
        else None
    )
    fields = {"reason": reason, "raw_reason": raw, "placement": record.to_json(), "policy_version": version}
    if moves.wait(pk=workload.id, fields=fields, note=note):
        for name, value in {**fields, "state": WorkloadState.WAITING}.items():
            setattr(workload, name, value)  # what was stored: no read back
        return workload
    return Workload.objects.get(id=workload.id)


@transaction.atomic
def _reject(workload: Workload, record: PlacementRecord, raw: str, version: str) -> Workload:
    if moves.reject(
        pk=workload.id,
        fields={
            "reason": LocalReason.POLICY,
            "raw_reason": raw,
            "placement": record.to_json(),
            "policy_version": version,
            "ended_at": runtime.now(),
        },
        note=Note(
            action="workload.rejected",
            workload=workload,
            policy_version=version,
            message=raw,
            inputs={"excluded": record.excluded_json()},
        ),
    ):
        notify_on_commit(workload_id=workload.id, event="failed")
    return Workload.objects.get(id=workload.id)


def workload_retry_elsewhere(*, workload_id: int, rejected_by: str, reason: str) -> Workload:
    """After a local rejection: the next candidate, or reject with the reason."""
    workload = Workload.objects.get(id=workload_id)
    tried = sorted(set(workload.tried_clusters) | {rejected_by})
    placement = PlacementRecord.from_json(workload.placement).rejected_by(rejected_by, reason).to_json()
    if moves.requeue_rejected(
        pk=workload_id,
        note=None,
        fields={
            "tried_clusters": tried,
            "reason": LocalReason.POLICY,
            "placement": placement,
            "raw_reason": f"{rejected_by} rejected it: {reason}",
        },
    ):
        notify_on_commit(workload_id=workload_id, event="withdrawn")  # once, by whoever moved it
    return workload_place(workload_id=workload_id)


@dataclass
class PassReport:
    due: int = 0  # looked at in this pass
    pausing: int = 0  # left for a later pass: their pause after a fruitless try runs on
    placed: int = 0
    left_due: int = 0  # due but over the pass's limit: the next pass follows at once (tasks.place_waiting)


def waiting_place_pass(*, now: datetime | None = None, limit: int = PASS_LIMIT) -> PassReport:
    """One placement pass over the waiting workloads, oldest first: the fleet is prepared
    once and shared by all of them, so the reads do not grow with the number of workloads
    or clusters; each workload costs only its own writes."""
    now = now or runtime.now()
    queue = _waiting_queue()
    ours = [row for row in queue if row[4] == "broker" and row[5] is None]
    due = due_ids(ours, now)
    report = PassReport(due=min(len(due), limit), pausing=len(ours) - len(due), left_due=max(0, len(due) - limit))
    if not due:
        return report
    shared = placing_pass_open(now=now, queue=queue)
    shared.writer = PassWriter(now=now, on_over=lambda d, exc: _over_quota(d.workload, d.record, str(exc), now))
    for workload in (
        Workload.objects.filter(id__in=due[:limit])
        .select_related("tenant", "project", "gpu_class")
        .order_by("created_at", "id")
    ):
        report.placed += int(place_in_pass(shared, workload).state == WorkloadState.RESERVED)
    shared.writer.flush()
    report.placed += shared.writer.placed
    return report


def _over_quota(workload: Workload, record: PlacementRecord, why: str, now: datetime) -> Workload:
    prior = PlacementRecord.from_json(workload.placement)
    return _wait(workload, _with_retry(record, prior, now), LocalReason.POLICY, why, record.policy_version)


def _waiting_queue() -> list[QueueRow]:
    return list(
        Workload.objects.filter(state__in=PLACEABLE)
        .order_by("created_at", "id")
        .values_list(
            "id",
            "created_at",
            "gpu_class_id",
            "total_gpus",
            "origin",
            "cancel_requested_at",
            RETRY_AT_LOOKUP,
            RETRY_SINCE_LOOKUP,
        )
    )


def placing_pass_open(*, now: datetime, queue: list[QueueRow] | None = None) -> PlacingPass:
    """A pass over the waiting queue as it stands: the fleet prepared and the queue read once."""
    shared = placing_pass_prepare(now=now)
    rows = _waiting_queue() if queue is None else queue
    shared.queue = [(created, wid, cls, gpus) for wid, created, cls, gpus, *_ in rows]
    shared.queue_read = True
    return shared


def place_in_pass(shared: PlacingPass, workload: Workload) -> Workload:
    """Place one workload of the pass (loaded with tenant, project and GPU class)."""
    outcome = place_one(workload, shared)
    if outcome.state not in PLACEABLE:
        shared.left.add(workload.id)
    return outcome
