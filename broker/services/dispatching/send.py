"""Dispatch: hand a reserved workload to its destination, exactly once.

Invariant 3 (one live destination job per workload) rests on three habits:
the attempt row is written and committed *before* the cluster is called; a retry
*looks the workload up* at the destination before submitting again; and the
unique (workload, attempt number) pair means two workers racing on the same
retry cannot both get to call the cluster.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction

from broker.backends.base import Backend, DestinationJob, ProjectIdentity, Rejected, Unavailable
from broker.backends.registry import backend_for, identity_for
from broker.failpoints import failpoint
from broker.lifecycle import LIVE_ATTEMPT_STATES, LIVE_RESERVATION_STATES
from broker.models import AttemptState, DispatchAttempt, GpuPool, Reservation, Workload, WorkloadState
from broker.models.workload import LocalReason
from broker.placement.record import PlacementRecord
from broker.services.records import moves
from broker.services.records import tasks_bridge
from broker.services.records.audit import audit, audit_link_destination
from broker.services.quota.reservations import reservation_confirm, reservation_release
from broker.services.records.transitions import Note
from broker.selectors.node_blocks import blocked_nodes
from broker.spec import WorkloadSpec, validate_spec
from broker import runtime
from broker.services.placing.cycle import workload_retry_elsewhere


def attempt_lease_s() -> float:
    """How long an attempt in flight is trusted to still be running (then it's presumed dead)."""
    return settings.GPUBROKER_BACKEND_TIMEOUT_S * 2 + 5


def workload_dispatch(*, workload_id: int) -> Workload:
    workload = Workload.objects.select_related("cluster", "project__tenant", "submitted_by").get(id=workload_id)
    moved = moves.start_dispatch(pk=workload_id, note=None)
    if not moved and workload.state not in (WorkloadState.DISPATCHING, WorkloadState.CANCELLING):
        return workload  # another worker got there first, or nothing left to dispatch
    if workload.destination_job_id:
        return workload
    attempt = _claim_attempt(workload)
    if attempt is None:
        return workload
    return _run_attempt(workload, attempt)


def _in_flight(attempt: DispatchAttempt | None) -> bool:
    return bool(
        attempt
        and attempt.state == AttemptState.STARTED
        and runtime.now() - attempt.created_at < timedelta(seconds=attempt_lease_s())
    )


def attempt_in_flight(workload: Workload) -> bool:
    """An attempt is still trusted to be talking to the destination: neither look the
    workload up as absent nor send it again until its lease runs out."""
    return _in_flight(workload.attempts.order_by("-number").first())


def attempt_after(workload: Workload, last: DispatchAttempt | None) -> DispatchAttempt:
    """The workload's attempt after ``last`` (not saved yet), at the cluster it is placed on."""
    return DispatchAttempt(workload=workload, cluster=workload.placed_cluster, number=last.number + 1 if last else 1)


def _claim_attempt(workload: Workload) -> DispatchAttempt | None:
    """Write the attempt before calling the cluster; None when another attempt is in flight."""
    last = workload.attempts.order_by("-number").first()
    if _in_flight(last):
        return None
    failpoint("dispatch.before_attempt_written")
    # one INSERT: outside a transaction it needs none (and a failed one leaves nothing to undo)
    alone = not transaction.get_connection().in_atomic_block
    try:
        with contextlib.nullcontext() if alone else transaction.atomic():
            attempt = attempt_after(workload, last)
            attempt.save(force_insert=True)
            return attempt
    except IntegrityError:
        return None  # a concurrent worker claimed this attempt number


def before_attempt_written() -> None:
    """The crash point before a chunk's attempt rows are written (broker.services.dispatching.chunk):
    the same point as one workload's, marked here, where the failpoint list says it sits."""
    failpoint("dispatch.before_attempt_written")


def _chosen_model(workload: Workload) -> str:
    """The GPU model of the pool placement chose ('' when that pool is gone)."""
    model = (
        GpuPool.objects.filter(cluster=workload.placed_cluster, name=chosen_pool(workload))
        .values_list("gpu_model", flat=True)
        .first()
    )
    return model or ""


def chosen_pool(workload: Workload) -> str:
    chosen = PlacementRecord.from_json(workload.placement).chosen
    return chosen.pool if chosen else ""


def _targeted(spec: WorkloadSpec, model: str, avoid: tuple[str, ...] = ()) -> WorkloadSpec:
    """The spec as sent: the model placement chose, and the nodes the broker holds back there."""
    spec = replace(spec, gpu_models=(model,)) if model else spec
    return replace(spec, exclude_nodes=avoid) if avoid else spec


def workload_adopt(*, workload_id: int, found: DestinationJob) -> Workload:
    """Record the job a look-up found at the destination (its dispatch reply was lost):
    reconcile's confirmation, with no second look-up and nothing sent."""
    workload = Workload.objects.select_related("cluster", "project", "submitted_by").get(id=workload_id)
    if workload.state != WorkloadState.DISPATCHING or workload.destination_job_id:
        return workload
    attempt = _claim_attempt(workload)
    if attempt is None:
        return workload
    return _adopt(workload, attempt, found)


def _earlier_attempt_may_have_landed(workload: Workload, attempt: DispatchAttempt) -> bool:
    if attempt.number == 1:
        return False  # the first attempt has no earlier one to look up (one read fewer per dispatch)
    return workload.attempts.filter(
        cluster=workload.cluster, number__lt=attempt.number, state__in=LIVE_ATTEMPT_STATES
    ).exists()


@dataclass(frozen=True)
class Known:
    """What a caller already read for an attempt (a chunk reads it for all its workloads at
    once, see ``dispatch_chunk``); one workload dispatched alone reads it here."""

    earlier_live: bool  # an earlier attempt at this cluster may have created the job
    reserved: bool  # a live quota reservation holds the GPUs
    gpu_model: str  # the model of the pool placement chose ('' when that pool is gone)
    identity: ProjectIdentity
    backend: Backend | None = None  # the cluster's backend, built once per chunk
    avoid_nodes: tuple[str, ...] = ()  # the destination's nodes the broker holds back (node_blocks)


@dataclass(frozen=True)
class Sent:
    """How a written attempt went: ``job_id`` when the cluster accepted it (the caller records
    that); any other outcome is already recorded, and ``answered`` is False when the
    cluster did not answer."""

    workload: Workload
    job_id: str = ""
    answered: bool = True


def known_for(workload: Workload, attempt: DispatchAttempt) -> Known:
    """What an attempt needs read, for one workload dispatched alone (a chunk reads it for all
    its workloads at once)."""
    return Known(
        earlier_live=_earlier_attempt_may_have_landed(workload, attempt),
        reserved=_reserved(workload),
        gpu_model=_chosen_model(workload),
        identity=identity_for(workload.project, workload.submitted_by),
        avoid_nodes=tuple(sorted(blocked_nodes().get(workload.cluster_id or 0, {}))),
    )


def _run_attempt(workload: Workload, attempt: DispatchAttempt) -> Workload:
    sent = attempt_send(workload, attempt, known_for(workload, attempt))
    if not sent.job_id:
        return sent.workload
    return _accepted(workload, attempt, sent.job_id, AttemptState.ACCEPTED)


def attempt_send(workload: Workload, attempt: DispatchAttempt, known: Known) -> Sent:
    """Call the cluster for a written attempt: look an earlier one up first, send nothing
    when cancelled or unreserved, else submit the spec as targeted."""
    try:
        # inside: a backend that can't be built is no answer
        backend = known.backend or backend_for(workload.cluster)
        if known.earlier_live:
            found = backend.find(workload.uid)
            if found is not None:
                return Sent(_adopt(workload, attempt, found))
        if workload.cancel_requested_at:
            return Sent(_finish_attempt_nothing_sent(workload, attempt))
        if not known.reserved:
            return Sent(_unreserved(workload, attempt))
        spec = _targeted(validate_spec(workload.spec), known.gpu_model, known.avoid_nodes)
        failpoint("dispatch.after_attempt_written")  # what is read is read: next comes the cluster call
        job_id = backend.submit(spec, workload.uid, known.identity)
        failpoint("dispatch.after_submit")
    except Rejected as exc:
        return Sent(_rejected(workload, attempt, exc))
    except Unavailable as exc:
        return Sent(_unknown(workload, attempt, str(exc)), answered=False)
    return Sent(workload, job_id=job_id)


def _reserved(workload: Workload) -> bool:
    return Reservation.objects.filter(workload=workload, state__in=LIVE_RESERVATION_STATES).exists()


def _adopt(workload: Workload, attempt: DispatchAttempt, found: DestinationJob) -> Workload:
    audit(
        action="dispatch.adopted",
        workload=workload,
        cluster=workload.placed_cluster.name,
        destination_job_id=found.job_id,
        message="found at the destination after a lost reply; not submitted again",
    )
    return _accepted(workload, attempt, found.job_id, AttemptState.ADOPTED)


@transaction.atomic
def _accepted(workload: Workload, attempt: DispatchAttempt, job_id: str, state: str) -> Workload:
    now = runtime.now()
    adopted = state == AttemptState.ADOPTED
    stamped = {"destination_job_id": job_id, "finished_at": now}
    # one transaction that rolls back whole on any error: the moves need no savepoints
    if adopted:  # (the earlier attempt whose reply was lost is the one that created this job)
        moves.attempt_adopted(pk=attempt.id, workload=workload, fields=stamped, savepoint=False)
    else:
        moves.attempt_accepted(pk=attempt.id, note=None, fields=stamped, savepoint=False)
    queued = moves.queued(
        adopted=adopted,
        pk=workload.id,
        note=None,
        where={"destination_job_id": ""},
        fields={"destination_job_id": job_id, "dispatched_at": now},
        savepoint=False,
    )
    if not queued:  # cancelled meanwhile (or an id already there): the job id is still recorded
        Workload.objects.filter(id=workload.id, destination_job_id="").update(
            destination_job_id=job_id, dispatched_at=now
        )
    reservation_confirm(workload=workload, cluster=workload.placed_cluster, now=now)
    audit_link_destination(workload=workload, cluster=workload.placed_cluster.name, destination_job_id=job_id)
    if state == AttemptState.ACCEPTED:
        audit(
            action="dispatch.accepted",
            workload=workload,
            cluster=workload.placed_cluster.name,
            destination_job_id=job_id,
            message=f"attempt {attempt.number}",
        )
    if queued:
        stored = {"state": WorkloadState.QUEUED, "destination_job_id": job_id, "dispatched_at": now}
        for name, value in stored.items():
            setattr(workload, name, value)  # what was stored: no read back
    else:
        workload.refresh_from_db()
    if workload.state == WorkloadState.CANCELLING:
        tasks_bridge.enqueue_cancel(workload.id)
    return workload


def _attempt_not_sent(attempt: DispatchAttempt, because: moves.NotSentBecause, error: str) -> None:
    """The attempt ends without reaching a cluster (no audit note: the caller's record says why)."""
    moves.attempt_not_sent(
        because=because,
        pk=attempt.id,
        note=None,
        fields={"error": error, "finished_at": runtime.now()},
    )


@transaction.atomic
def _finish_attempt_nothing_sent(workload: Workload, attempt: DispatchAttempt) -> Workload:
    _attempt_not_sent(attempt, "cancelled", "cancelled before it was sent")
    tasks_bridge.enqueue_cancel(workload.id)
    return workload


@transaction.atomic
def _unreserved(workload: Workload, attempt: DispatchAttempt) -> Workload:
    """No live reservation (a crash between releasing or expiring it and re-placing the
    workload): nothing is sent without one; the workload goes back to placement."""
    _attempt_not_sent(attempt, "unreserved", "not sent: no live quota reservation")
    if moves.requeue_unreserved(
        pk=workload.id,
        fields={"reason": LocalReason.OTHER, "raw_reason": "its quota reservation ended before dispatch; placed again"},
        note=Note(
            action="dispatch.unreserved",
            workload=workload,
            cluster=workload.placed_cluster.name,
            message="not sent: the quota reservation had ended; placing again",
        ),
    ):
        tasks_bridge.enqueue_place(workload.id)
    return workload


@transaction.atomic
def _unknown(workload: Workload, attempt: DispatchAttempt, error: str) -> Workload:
    moves.attempt_no_answer(pk=attempt.id, note=None, fields={"error": error[:2000], "finished_at": runtime.now()})
    audit(
        action="dispatch.unknown",
        workload=workload,
        cluster=workload.placed_cluster.name,
        message=f"no answer ({error}); the workload will be looked up before any retry",
    )
    return workload


def _rejected(workload: Workload, attempt: DispatchAttempt, exc: Rejected) -> Workload:

    with transaction.atomic():
        moves.attempt_rejected(pk=attempt.id, note=None, fields={"error": exc.raw[:2000], "finished_at": runtime.now()})
        audit(
            action="dispatch.rejected",
            workload=workload,
            cluster=workload.placed_cluster.name,
            message=exc.reason,
            inputs={"raw": exc.raw},
        )
        reservation_release(workload=workload, reason=f"rejected by {workload.placed_cluster.name}: {exc.reason}")
    failpoint("dispatch.after_reject_released")
    return workload_retry_elsewhere(
        workload_id=workload.id, rejected_by=workload.placed_cluster.name, reason=exc.reason
    )
