"""Dispatch in chunks: the workloads a placing pass reserved together, dispatched by one task.

The invariants are those of one workload dispatched alone (``broker.services.dispatching.send``),
paid for once per chunk instead of once per workload:

* one transaction claims the chunk: it locks the workloads, moves the reserved ones to
  ``dispatching`` in one conditional update, reads their earlier attempts, live
  reservations and chosen pools in one query each, and writes every attempt in one INSERT;
  it commits *before* any cluster is called.  A workload with an attempt still in flight,
  or already sent, gets none; an attempt number taken by a concurrent worker (the unique
  pair) rolls the claim back whole and each workload is dispatched alone instead;
* each cluster is then called once per workload (``dispatch.attempt_send``); what is not an
  acceptance (a rejection, no answer, a job found after a lost reply, a cancellation or a
  lost reservation before sending) is recorded at once by the one-workload functions;
* one transaction records every acceptance: the attempts, the workloads' moves to
  ``queued`` (conditional: one cancelled meanwhile keeps its state and gets the job id and
  its cancellation), the reservations' confirmations and their audit records, in a few
  statements for the whole chunk.

A cluster that did not answer is not called again in the same chunk, nor is any cluster
once the chunk has used its time budget: those attempts end ``not_sent`` (the cluster was
never called for them) and each workload gets its own dispatch task.  A worker that dies
mid-chunk leaves its attempts ``started``: reconcile looks each one up after the lease,
exactly as for one workload.  An unexpected error on one workload does not stop the others:
theirs are recorded, then the error is raised.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import CharField, IntegerField
from django.db.models.fields.json import KT

from broker.backends.base import Backend, ProjectIdentity, Unavailable
from broker.backends.registry import backend_for, identity_for
from broker.lifecycle import LIVE_ATTEMPT_STATES, LIVE_RESERVATION_STATES, TransitionReason
from broker.placement.record import CHOSEN_POOL_LOOKUP
from broker.models import (
    AuditRecord,
    DispatchAttempt,
    GpuPool,
    Reservation,
    ReservationState,
    Workload,
    WorkloadState,
)
from broker.services.records import moves
from broker.services.records import tasks_bridge
from broker.services.records.audit import audit_many, audit_record
from broker.services.dispatching.send import (
    Known,
    _in_flight,
    attempt_after,
    attempt_send,
    before_attempt_written,
    workload_dispatch,
)
from broker.services.records.bulk_moves import per_row
from broker.services.records.transitions import Note, moved_record
from broker.selectors.node_blocks import blocked_nodes
from broker import runtime

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Claim:
    """A workload of the chunk whose attempt is written: what its send needs."""

    workload: Workload
    attempt: DispatchAttempt
    known: Known


class _Contended(Exception):
    """Some workload of the chunk moved under the claim: each is dispatched alone instead."""


def workloads_dispatch(*, workload_ids: Sequence[int]) -> int:
    """Dispatch a chunk of workloads; returns how many their clusters accepted here."""
    ids = sorted(set(workload_ids))
    try:
        claims = _claim(ids)
    except (_Contended, IntegrityError):
        return _alone(ids)
    return _send_all(claims)


def _alone(ids: Sequence[int]) -> int:
    """The chunk as single dispatches (each claims its own attempt); an error of one waits
    until the others are done."""
    errors: list[Exception] = []
    accepted = 0
    for wid in ids:
        try:
            accepted += int(workload_dispatch(workload_id=wid).state == WorkloadState.QUEUED)
        except Exception as exc:  # noqa: BLE001 - the others must still be dispatched
            log.exception("dispatch of workload %s failed; the rest of its chunk carries on", wid)
            errors.append(exc)
    if errors:
        raise errors[0]
    return accepted


# --- the claim: one transaction before any cluster is called ---------------------------------


@transaction.atomic
def _claim(ids: Sequence[int]) -> list[Claim]:
    rows = list(
        Workload.objects.select_for_update(of=("self",))
        .select_related("cluster", "project__tenant", "submitted_by")
        .defer("placement")  # kilobytes a workload (every ranked candidate): only its chosen pool is needed
        .annotate(chosen_pool=KT(CHOSEN_POOL_LOOKUP))
        .filter(id__in=ids)
        .order_by("id")
    )
    fresh = [w.id for w in rows if w.state == WorkloadState.RESERVED and w.destination_job_id == ""]
    if fresh and _move(fresh) != len(fresh):
        raise _Contended  # (locked above: only a database without row locks gets here)
    going = [
        w
        for w in rows
        if not w.destination_job_id
        and (w.id in fresh or w.state in (WorkloadState.DISPATCHING, WorkloadState.CANCELLING))
    ]
    earlier: dict[int, list[DispatchAttempt]] = defaultdict(list)
    for attempt in DispatchAttempt.objects.filter(workload_id__in=[w.id for w in going]):
        earlier[attempt.workload_id].append(attempt)
    attempts = []
    for w in going:
        last = max(earlier[w.id], key=lambda a: a.number, default=None)
        if _in_flight(last):
            continue  # another worker is still talking to the cluster about it
        before_attempt_written()
        attempts.append(attempt_after(w, last))
    if not attempts:
        return []
    DispatchAttempt.objects.bulk_create(attempts)  # a number taken meanwhile raises: all rolls back
    return _claims(attempts, earlier)


def _move(ids: list[int]) -> int:
    return moves.start_dispatch(where={"id__in": ids, "destination_job_id": ""}, note=None, savepoint=False)


def _claims(attempts: list[DispatchAttempt], earlier: Mapping[int, list[DispatchAttempt]]) -> list[Claim]:
    """The chunk's reads for its sends: live reservations and the chosen pools' GPU models."""
    workloads = [a.workload for a in attempts]
    reserved = set(
        Reservation.objects.filter(
            workload_id__in=[w.id for w in workloads], state__in=LIVE_RESERVATION_STATES
        ).values_list("workload_id", flat=True)
    )
    models = {
        (cluster_id, name): model
        for cluster_id, name, model in GpuPool.objects.filter(
            cluster_id__in={w.cluster_id for w in workloads}
        ).values_list("cluster_id", "name", "gpu_model")
    }
    identities: dict[tuple[int, int | None], ProjectIdentity] = {}
    blocked = blocked_nodes()
    claims = []
    for attempt in attempts:
        w = attempt.workload
        key = (w.project_id, w.submitted_by_id)
        if key not in identities:
            identities[key] = identity_for(w.project, w.submitted_by)
        landed = any(
            a.cluster_id == w.cluster_id and a.number < attempt.number and a.state in LIVE_ATTEMPT_STATES
            for a in earlier.get(w.id, ())
        )
        known = Known(
            earlier_live=landed,
            reserved=w.id in reserved,
            gpu_model=models.get((w.placed_cluster.id, getattr(w, "chosen_pool", None) or ""), ""),
            identity=identities[key],
            avoid_nodes=tuple(sorted(blocked.get(w.placed_cluster.id, {}))),
        )
        claims.append(Claim(w, attempt, known))
    return claims


# --- the sends ---------------------------------------------------------------------------------


def budget_s() -> float:
    """How long a chunk keeps calling clusters: its task's time limit less room for two
    calls that time out and the recording."""
    return max(0.0, settings.CELERY_TASK_SOFT_TIME_LIMIT - 2 * settings.GPUBROKER_BACKEND_TIMEOUT_S)


def _send_all(claims: list[Claim]) -> int:
    accepted: list[tuple[Claim, str]] = []
    held: list[Claim] = []  # not sent in this chunk: each goes on its own
    silent: set[int] = set()  # clusters that did not answer in this chunk
    backends: dict[int, Backend | None] = {}
    errors: list[Exception] = []
    deadline = runtime.now() + timedelta(seconds=budget_s())  # the broker's clock: a simulated wait counts
    for i, claim in enumerate(claims):
        cluster_id = claim.workload.placed_cluster.id
        if cluster_id in silent or (i and runtime.now() > deadline):
            held.append(claim)
            continue
        try:
            known = _with_backend(claim.known, _backend(claim.workload, backends))
            sent = attempt_send(claim.workload, claim.attempt, known)
        except Exception as exc:  # noqa: BLE001 - recorded below; the others carry on
            log.exception("dispatch of workload %s failed; the rest of its chunk carries on", claim.workload.id)
            errors.append(exc)
            continue
        if sent.job_id:
            accepted.append((claim, sent.job_id))
        elif not sent.answered:
            silent.add(cluster_id)
    _record_accepted(accepted)
    _hold_back(held)
    if errors:
        raise errors[0]
    return len(accepted)


def _backend(workload: Workload, built: dict[int, Backend | None]) -> Backend | None:
    """The cluster's backend, built once per chunk; None when it cannot be built (then the
    send builds it again and records that as no answer)."""
    cluster = workload.placed_cluster
    if cluster.id not in built:
        try:
            built[cluster.id] = backend_for(cluster)
        except Unavailable:
            built[cluster.id] = None
    return built[cluster.id]


def _with_backend(known: Known, backend: Backend | None) -> Known:
    return replace(known, backend=backend)


@transaction.atomic
def _hold_back(claims: list[Claim]) -> None:
    """Attempts never sent end ``not_sent``; each workload is dispatched by its own task."""
    if not claims:
        return
    moves.attempt_not_sent(
        because="chunk",
        where={"id__in": [c.attempt.id for c in claims]},
        note=None,
        fields={
            "error": "not sent with its chunk (a cluster did not answer, or time ran out)",
            "finished_at": runtime.now(),
        },
        savepoint=False,
    )
    for claim in claims:
        tasks_bridge.enqueue_dispatch(claim.workload.id)


# --- the record of the acceptances: one transaction -------------------------------------------


@transaction.atomic
def _record_accepted(accepted: list[tuple[Claim, str]]) -> None:
    if not accepted:
        return
    now = runtime.now()
    jobs = {c.workload.id: job for c, job in accepted}
    moves.attempt_accepted(
        where={"id__in": [c.attempt.id for c, _ in accepted]},
        note=None,
        fields={
            "destination_job_id": per_row(
                "id", {c.attempt.id: job for c, job in accepted}, CharField(), "destination_job_id"
            ),
            "finished_at": now,
        },
        savepoint=False,
    )
    _queue(jobs, now)
    workloads = {c.workload.id: c.workload for c, _ in accepted}
    records = _confirm_reservations(workloads, now)
    _link_decisions(workloads, jobs)
    records += [
        audit_record(
            action="dispatch.accepted",
            workload=c.workload,
            cluster=c.workload.placed_cluster.name,
            destination_job_id=job,
            message=f"attempt {c.attempt.number}",
        )
        for c, job in accepted
    ]
    audit_many(records)


def _queue(jobs: Mapping[int, str], now: datetime) -> None:
    """Dispatching -> queued with the job id; one that moved meanwhile (cancelled) keeps its
    state, gets the job id, and its cancellation goes on to the cluster."""
    rows = dict(
        Workload.objects.select_for_update().filter(id__in=list(jobs), destination_job_id="").values_list("id", "state")
    )
    going = [wid for wid, state in rows.items() if state == WorkloadState.DISPATCHING]
    ids = per_row("id", jobs, CharField(), "destination_job_id")
    if going:
        moves.queued(
            where={"id__in": going, "destination_job_id": ""},
            note=None,
            fields={"destination_job_id": ids, "dispatched_at": now},
            savepoint=False,
        )
    others = [wid for wid in rows if wid not in going]
    if others:
        Workload.objects.filter(id__in=others, destination_job_id="").update(destination_job_id=ids, dispatched_at=now)
    for wid in others:
        if rows[wid] == WorkloadState.CANCELLING:
            tasks_bridge.enqueue_cancel(wid)


def _confirm_reservations(workloads: Mapping[int, Workload], now: datetime) -> list[AuditRecord]:
    """The holds become confirmed usage (``quota.reservation_confirm`` for a chunk): one
    conditional update, and the record of each one that moved."""
    held = dict(
        Reservation.objects.select_for_update()
        .filter(workload_id__in=list(workloads), state=ReservationState.ACTIVE)
        .values_list("id", "workload_id")
    )
    if not held:
        return []
    moves.reservation_confirm(
        where={"id__in": list(held)},
        note=None,
        fields={
            "confirmed_at": now,
            "cluster_id": per_row(
                "workload_id", {wid: w.cluster_id for wid, w in workloads.items()}, IntegerField(), "cluster_id"
            ),
        },
        savepoint=False,
    )
    return [
        moved_record(
            Note(action="reservation.confirmed", workload=workloads[wid], cluster=workloads[wid].placed_cluster.name),
            to=ReservationState.CONFIRMED,
            reason=TransitionReason.ACCEPTED,
        )
        for wid in held.values()
    ]


def _link_decisions(workloads: Mapping[int, Workload], jobs: Mapping[int, str]) -> None:
    """``audit.audit_link_destination`` for a chunk: each workload's newest placement decision
    for its cluster that has no job id yet gets the job's id."""
    newest: dict[int, int] = {}
    for rid, wid, cluster in (
        AuditRecord.objects.filter(workload_id__in=list(workloads), action="placement.decided", destination_job_id="")
        .order_by("created_at", "id")
        .values_list("id", "workload_id", "cluster")
    ):
        if cluster == workloads[wid].placed_cluster.name:
            newest[wid] = rid  # ordered: the last one seen is the newest
    if newest:
        AuditRecord.objects.filter(id__in=list(newest.values()), destination_job_id="").update(
            destination_job_id=per_row(
                "id", {rid: jobs[wid] for wid, rid in newest.items()}, CharField(), "destination_job_id"
            )
        )
