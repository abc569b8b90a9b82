"""The lifecycle's verbs: one named move per transition of a workload, a reservation, a
dispatch attempt, an escalation, a quota request, a notification, a policy release and an
impact replay.

Each verb is the only place its move is written (``tests/conventions/test_moves.py``): the
row kind, the target state, the states it may come from and the reason are fixed here; the
caller says which rows (``pk`` or ``where``), what else is written with the move (``fields``),
what follows it (``then``) and its audit record (``note``).  Every verb returns how many rows
moved (0: someone else got there first; the caller decides what that means), through the one
writer, ``broker.services.records.transitions.transition``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Literal, TypedDict, Unpack

from django.contrib.auth.models import User
from django.db import models

from broker.lifecycle import (
    FOLLOWED_STATES,
    LIVE_ATTEMPT_STATES,
    LIVE_RESERVATION_STATES,
    NOT_DISPATCHED_STATES,
    ON_THE_WAY_STATES,
    PLACEABLE_STATES,
    UNRESOLVED_ESCALATION_STATES,
)
from broker.lifecycle import AttemptState as A
from broker.lifecycle import DeliveryState as D
from broker.lifecycle import EscalationState as E
from broker.lifecycle import ImpactState as IR
from broker.lifecycle import QuotaRequestState as Q
from broker.lifecycle import ReleaseState as P
from broker.lifecycle import ReservationState as R
from broker.lifecycle import TransitionReason as Why
from broker.lifecycle import WorkloadState as W
from broker.models import DispatchAttempt, Escalation, Notification, QuotaRequest, Reservation, Workload
from broker.policyrelease.models import ImpactReplay, PolicyRelease
from broker.services.records.transitions import Note, transition


class Rows(TypedDict, total=False):
    """Which rows move and what goes with the move (see ``transition``)."""

    pk: int | None
    where: Mapping[str, object] | None
    exclude: Mapping[str, object] | None
    fields: Mapping[str, object] | None
    note: Note | None
    then: Callable[[], object] | None
    actor: User | None
    savepoint: bool


def _write(model: type[models.Model], to: str, reason: Why, from_: Iterable[str] | None, rows: Rows) -> int:
    return transition(
        model,
        rows.get("pk"),
        to=to,
        reason=reason,
        from_=from_,
        actor=rows.get("actor"),
        where=rows.get("where"),
        exclude=rows.get("exclude"),
        fields=rows.get("fields"),
        note=rows.get("note"),
        then=rows.get("then"),
        savepoint=rows.get("savepoint", True),
    )


# --- workloads: placing ---------------------------------------------------------------------------


def reserve(**rows: Unpack[Rows]) -> int:
    """Placement chose a destination and reserved quota (one workload or a chunk)."""
    return _write(Workload, W.RESERVED, Why.PLACED, PLACEABLE_STATES, rows)


def wait(**rows: Unpack[Rows]) -> int:
    """No destination takes it now (waiting -> waiting: placement looked again)."""
    return _write(Workload, W.WAITING, Why.NO_PLACE_YET, PLACEABLE_STATES, rows)


def reject(**rows: Unpack[Rows]) -> int:
    """No destination will ever take it."""
    return _write(Workload, W.REJECTED, Why.NO_PLACE_EVER, PLACEABLE_STATES, rows)


def requeue_rejected(**rows: Unpack[Rows]) -> int:
    """The destination refused it: back to placement, without that destination."""
    return _write(Workload, W.WAITING, Why.REJECTED_BY_DESTINATION, (W.DISPATCHING,), rows)


def requeue_unreserved(**rows: Unpack[Rows]) -> int:
    """Its reservation ended before dispatch: nothing was sent; back to placement."""
    return _write(Workload, W.WAITING, Why.RESERVATION_LOST, (W.DISPATCHING,), rows)


def requeue_expired(**rows: Unpack[Rows]) -> int:
    """No destination acknowledged it before its reservation expired: back to placement."""
    return _write(Workload, W.WAITING, Why.RESERVATION_EXPIRED, ON_THE_WAY_STATES, rows)


def withdraw(**rows: Unpack[Rows]) -> int:
    """Held at its destination by a local policy too long: cancelled there, placed again."""
    return _write(Workload, W.WAITING, Why.WITHDRAWN, (W.QUEUED,), rows)


def move_elsewhere(**rows: Unpack[Rows]) -> int:
    """Waiting in its destination's queue while another could start it now: cancelled there,
    placed again."""
    return _write(Workload, W.WAITING, Why.MOVED, (W.QUEUED,), rows)


# --- workloads: dispatching, following, ending -----------------------------------------------------


def start_dispatch(**rows: Unpack[Rows]) -> int:
    return _write(Workload, W.DISPATCHING, Why.DISPATCH_STARTED, (W.RESERVED,), rows)


def queued(*, adopted: bool = False, **rows: Unpack[Rows]) -> int:
    """The destination holds the job: it accepted it, or a look-up found it (``adopted``)."""
    return _write(Workload, W.QUEUED, Why.ADOPTED if adopted else Why.ACCEPTED, (W.DISPATCHING,), rows)


def started(*, from_: Iterable[str] | None = None, **rows: Unpack[Rows]) -> int:
    """The destination started the job (a MultiKueue worker admitting it counts)."""
    return _write(Workload, W.RUNNING, Why.STARTED_AT_DESTINATION, from_, rows)


def requeued_there(**rows: Unpack[Rows]) -> int:
    """Its destination stopped the running job and queued it again (Kueue's eviction by
    preemption, Slurm's requeue): the broker follows the same job."""
    return _write(Workload, W.QUEUED, Why.REQUEUED_AT_DESTINATION, (W.RUNNING,), rows)


def requeue_preempted(**rows: Unpack[Rows]) -> int:
    """Preempted at its destination, which ended the job (Slurm's PreemptMode=CANCEL): back to
    placement, for a new job."""
    return _write(Workload, W.WAITING, Why.PREEMPTED_AT_DESTINATION, (W.QUEUED, W.RUNNING), rows)


def requeue_gpu_check(**rows: Unpack[Rows]) -> int:
    """Its pre-flight GPU check failed on a worker, which ended the job there: back to
    placement, for a new job on other nodes (``broker.services.following.gpu_check``)."""
    return _write(Workload, W.WAITING, Why.GPU_CHECK_FAILED, (W.QUEUED, W.RUNNING), rows)


def preempt_by_broker(**rows: Unpack[Rows]) -> int:
    """Preempted by the broker, where the policy makes it preemption's owner, for a waiting
    workload of a higher priority; its job cancelled there (confirmed): back to placement."""
    return _write(Workload, W.WAITING, Why.PREEMPTED_BY_BROKER, (W.RUNNING,), rows)


def ended(*, to: str, from_: Iterable[str] | None = FOLLOWED_STATES, **rows: Unpack[Rows]) -> int:
    """The job ended at its destination: completed, failed or cancelled there."""
    return _write(Workload, to, Why.ENDED_AT_DESTINATION, from_, rows)


def gone_at_manager(**rows: Unpack[Rows]) -> int:
    """Its MultiKueue manager's Workload was deleted: the workload ends cancelled."""
    return _write(Workload, W.CANCELLED, Why.WORKLOAD_ENDED, None, rows)


def cancel_requested(*, dispatched: bool, **rows: Unpack[Rows]) -> int:
    """Someone asked to cancel it: nothing at a destination yet ends it at once; otherwise it is
    cancelling until the destination confirms."""
    if dispatched:
        return _write(Workload, W.CANCELLING, Why.CANCEL_REQUESTED, None, rows)
    return _write(Workload, W.CANCELLED, Why.CANCEL_REQUESTED, NOT_DISPATCHED_STATES, rows)


def cancel_confirmed(**rows: Unpack[Rows]) -> int:
    return _write(Workload, W.CANCELLED, Why.CANCEL_CONFIRMED, (W.CANCELLING,), rows)


def declare_dead(*, from_: Iterable[str], **rows: Unpack[Rows]) -> int:
    """An admin declared the run dead."""
    return _write(Workload, W.FAILED, Why.DECLARED_DEAD, from_, rows)


# --- dispatch attempts -----------------------------------------------------------------------------


def attempt_accepted(**rows: Unpack[Rows]) -> int:
    return _write(DispatchAttempt, A.ACCEPTED, Why.ACCEPTED, None, rows)


def attempt_adopted(*, pk: int, workload: Workload, fields: Mapping[str, object], savepoint: bool = True) -> int:
    """A look-up found the job after a lost reply: this attempt adopted it, and the earlier
    unanswered attempts of the workload are the ones that created it."""
    moved = _write(DispatchAttempt, A.ADOPTED, Why.ADOPTED, None, {"pk": pk, "fields": fields, "savepoint": savepoint})
    earlier: Rows = {"where": {"workload": workload}, "exclude": {"id": pk}, "fields": fields, "savepoint": savepoint}
    _write(DispatchAttempt, A.ACCEPTED, Why.ADOPTED, LIVE_ATTEMPT_STATES, earlier)
    return moved


NotSentBecause = Literal["cancelled", "unreserved", "chunk"]


def attempt_not_sent(*, because: NotSentBecause, **rows: Unpack[Rows]) -> int:
    """The attempt ends without reaching its cluster: cancelled first, no live reservation, or
    left unsent by its chunk."""
    reason = (
        Why.CANCEL_REQUESTED
        if because == "cancelled"
        else Why.RESERVATION_LOST
        if because == "unreserved"
        else Why.NOT_SENT
    )
    return _write(DispatchAttempt, A.NOT_SENT, reason, (A.STARTED,), rows)


def attempt_no_answer(**rows: Unpack[Rows]) -> int:
    return _write(DispatchAttempt, A.UNKNOWN, Why.NO_ANSWER, None, rows)


def attempt_rejected(**rows: Unpack[Rows]) -> int:
    return _write(DispatchAttempt, A.REJECTED, Why.REJECTED_BY_DESTINATION, None, rows)


# --- quota reservations ----------------------------------------------------------------------------


def reservation_confirm(**rows: Unpack[Rows]) -> int:
    """The destination acknowledged the job: the hold is confirmed until it ends."""
    return _write(Reservation, R.CONFIRMED, Why.ACCEPTED, None, rows)


def reservation_release(**rows: Unpack[Rows]) -> int:
    return _write(Reservation, R.RELEASED, Why.WORKLOAD_ENDED, LIVE_RESERVATION_STATES, rows)


def reservation_expire(**rows: Unpack[Rows]) -> int:
    return _write(Reservation, R.EXPIRED, Why.RESERVATION_EXPIRED, None, rows)


# --- escalations -----------------------------------------------------------------------------------


def escalation_acknowledge(**rows: Unpack[Rows]) -> int:
    return _write(Escalation, E.ACKNOWLEDGED, Why.ACKNOWLEDGED, None, rows)


def escalation_resolve(**rows: Unpack[Rows]) -> int:
    return _write(Escalation, E.RESOLVED, Why.RESOLVED, UNRESOLVED_ESCALATION_STATES, rows)


# --- quota requests, notifications, policy releases, impact replays ----------------------------------


def quota_request_decide(*, approve: bool, **rows: Unpack[Rows]) -> int:
    """The quota's owner approved (the limit is raised until the end date) or refused it."""
    if approve:
        return _write(QuotaRequest, Q.APPROVED, Why.QUOTA_REQUEST_APPROVED, (Q.PENDING,), rows)
    return _write(QuotaRequest, Q.REFUSED, Why.QUOTA_REQUEST_REFUSED, (Q.PENDING,), rows)


def quota_request_end(**rows: Unpack[Rows]) -> int:
    """Its end date passed: the raise is taken back."""
    return _write(QuotaRequest, Q.ENDED, Why.QUOTA_REQUEST_ENDED, (Q.APPROVED,), rows)


def delivery_done(*, delivered: bool, **rows: Unpack[Rows]) -> int:
    """A notification reached its receiver, or failed for good."""
    if delivered:
        return _write(Notification, D.DELIVERED, Why.DELIVERED, (D.PENDING,), rows)
    return _write(Notification, D.FAILED, Why.DELIVERY_FAILED, (D.PENDING,), rows)


def delivery_retry(**rows: Unpack[Rows]) -> int:
    """A webhook attempt failed; another follows (pending -> pending, one attempt more)."""
    return _write(Notification, D.PENDING, Why.DELIVERY_RETRY, (D.PENDING,), rows)


def release_move(*, to: str, from_: Iterable[str], **rows: Unpack[Rows]) -> int:
    """A policy release moves along its lifecycle (proposed, approved, active, retired)."""
    reason = (
        Why.POLICY_PROPOSED
        if to == P.PROPOSED
        else Why.POLICY_APPROVED
        if to == P.APPROVED
        else Why.POLICY_ACTIVATED
        if to == P.ACTIVE
        else Why.POLICY_RETIRED
    )
    return _write(PolicyRelease, to, reason, from_, rows)


def impact_started(**rows: Unpack[Rows]) -> int:
    return _write(ImpactReplay, IR.RUNNING, Why.IMPACT_STARTED, (IR.QUEUED,), rows)


def impact_finished(*, ok: bool, **rows: Unpack[Rows]) -> int:
    if ok:
        return _write(ImpactReplay, IR.DONE, Why.IMPACT_DONE, (IR.RUNNING,), rows)
    return _write(ImpactReplay, IR.FAILED, Why.IMPACT_FAILED, (IR.QUEUED, IR.RUNNING), rows)
