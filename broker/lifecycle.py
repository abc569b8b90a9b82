"""The lifecycle of workloads, quota reservations, dispatch attempts, escalations, quota
requests, notification deliveries, policy releases and impact replays.

One table per kind says which state may follow which; the named sets below are what the
rest of the broker reads instead of listing states by hand.  Pure data: nothing here
touches the database.  ``broker.services.records.transitions.transition`` is the one writer that
moves a row from one state to another, and it refuses anything this table does not list.

The state enums live here (the models import them), so the table and the choices of the
``state`` columns can never disagree.
"""

from __future__ import annotations

from collections.abc import Mapping

from django.db import models


class WorkloadState(models.TextChoices):
    SUBMITTED = "submitted", "Submitted"
    WAITING = "waiting", "Waiting for a place"
    RESERVED = "reserved", "Quota reserved"
    DISPATCHING = "dispatching", "Dispatching"
    QUEUED = "queued", "In the local queue"
    RUNNING = "running", "Running"
    CANCELLING = "cancelling", "Cancelling"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    REJECTED = "rejected", "Rejected"


class ReservationState(models.TextChoices):
    ACTIVE = "active", "Held, awaiting the destination"
    CONFIRMED = "confirmed", "Confirmed by the destination"
    RELEASED = "released", "Released"
    EXPIRED = "expired", "Expired"


class AttemptState(models.TextChoices):
    STARTED = "started", "Started (outcome not yet known)"
    ACCEPTED = "accepted", "Accepted by the destination"
    ADOPTED = "adopted", "Found at the destination after a lost reply"
    REJECTED = "rejected", "Rejected by the destination"
    NOT_SENT = "not_sent", "Not sent: the destination was never called"
    UNKNOWN = "unknown", "No answer: look up before retrying"


class EscalationState(models.TextChoices):
    OPEN = "open", "Open"
    ACKNOWLEDGED = "acknowledged", "Acknowledged"
    RESOLVED = "resolved", "Resolved"


class QuotaRequestState(models.TextChoices):
    PENDING = "pending", "Waiting for the quota's owner"
    APPROVED = "approved", "Approved: the limit is raised until the end date"
    REFUSED = "refused", "Refused"
    ENDED = "ended", "Ended: the limit is back"


class DeliveryState(models.TextChoices):
    PENDING = "pending", "Pending"
    DELIVERED = "delivered", "Delivered"
    FAILED = "failed", "Failed for good"


class ReleaseState(models.TextChoices):
    DRAFT = "draft", "Draft"
    PROPOSED = "proposed", "Proposed"
    APPROVED = "approved", "Approved"
    ACTIVE = "active", "Active"
    RETIRED = "retired", "Retired"


class ImpactState(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class TransitionReason(models.TextChoices):
    """Why a row changed state: recorded with the transition's audit record."""

    PLACED = "placed", "Placement chose a destination and reserved quota"
    NO_PLACE_YET = "no_place_yet", "No destination takes it now"
    NO_PLACE_EVER = "no_place_ever", "No destination will ever take it"
    DISPATCH_STARTED = "dispatch_started", "Dispatch began"
    ACCEPTED = "accepted", "The destination accepted the job"
    ADOPTED = "adopted", "The job was found at the destination after a lost reply"
    REJECTED_BY_DESTINATION = "rejected_by_destination", "The destination rejected the job"
    NO_ANSWER = "no_answer", "The destination did not answer"
    NOT_SENT = "not_sent", "Nothing was sent to the destination"
    RESERVATION_LOST = "reservation_lost", "The quota reservation ended before dispatch"
    RESERVATION_EXPIRED = "reservation_expired", "No destination acknowledged the job in time"
    CANCEL_REQUESTED = "cancel_requested", "Someone asked to cancel it"
    CANCEL_CONFIRMED = "cancel_confirmed", "The destination confirmed the cancellation"
    STARTED_AT_DESTINATION = "started_at_destination", "The destination started the job"
    ENDED_AT_DESTINATION = "ended_at_destination", "The job ended at the destination"
    REQUEUED_AT_DESTINATION = (
        "requeued_at_destination",
        "The destination stopped the running job (preempted or evicted) and queued it again",
    )
    PREEMPTED_AT_DESTINATION = (
        "preempted_at_destination",
        "Preempted at the destination, which does not queue it again: placed again",
    )
    PREEMPTED_BY_BROKER = (
        "preempted_by_broker",
        "Preempted by the broker for a higher-priority workload where it owns preemption: placed again",
    )
    GPU_CHECK_FAILED = (
        "gpu_check_failed",
        "Its pre-flight GPU check failed on a node: placed again, not there, and not charged",
    )
    DECLARED_DEAD = "declared_dead", "An admin declared the run dead"
    WORKLOAD_ENDED = "workload_ended", "The workload ended"
    WITHDRAWN = "withdrawn", "Held at its destination by a local policy too long: cancelled there, placed again"
    MOVED = "moved", "Waiting in one queue while another destination could start it now: cancelled, placed again"
    ACKNOWLEDGED = "acknowledged", "An admin acknowledged it"
    RESOLVED = "resolved", "An admin resolved it"
    QUOTA_REQUEST_APPROVED = "quota_request_approved", "The quota's owner approved the request"
    QUOTA_REQUEST_REFUSED = "quota_request_refused", "The quota's owner refused the request"
    QUOTA_REQUEST_ENDED = "quota_request_ended", "The request's end date passed: the raise is taken back"
    DELIVERED = "delivered", "The message reached its receiver"
    DELIVERY_FAILED = "delivery_failed", "The message could not be delivered, for good"
    DELIVERY_RETRY = "delivery_retry", "A delivery attempt failed; another follows"
    POLICY_PROPOSED = "policy_proposed", "The policy version was proposed"
    POLICY_APPROVED = "policy_approved", "The policy version was approved"
    POLICY_ACTIVATED = "policy_activated", "The policy version was put in force"
    POLICY_RETIRED = "policy_retired", "The policy version was retired"
    IMPACT_STARTED = "impact_started", "The impact replay started"
    IMPACT_DONE = "impact_done", "The impact replay finished"
    IMPACT_FAILED = "impact_failed", "The impact replay failed"


W, R, A, E = WorkloadState, ReservationState, AttemptState, EscalationState
Q, D, P, IR = QuotaRequestState, DeliveryState, ReleaseState, ImpactState

# --- named sets -----------------------------------------------------------------------
TERMINAL_STATES = (W.COMPLETED, W.FAILED, W.CANCELLED, W.REJECTED)
ACTIVE_STATES = tuple(s for s in W if s not in TERMINAL_STATES)
# A cancel can still be asked for (a cancelling one is already on its way).
CANCELLABLE_STATES = tuple(s for s in ACTIVE_STATES if s != W.CANCELLING)
# Waiting for placement: the placer may (re)consider these.
PLACEABLE_STATES = (W.SUBMITTED, W.WAITING)
# Nothing at any destination yet: a cancel ends them at once.
NOT_DISPATCHED_STATES = (W.SUBMITTED, W.WAITING, W.RESERVED)
# Placed and holding quota, not yet known to the destination.
ON_THE_WAY_STATES = (W.RESERVED, W.DISPATCHING)
# A destination job may exist and must be followed.
AT_DESTINATION_STATES = (W.DISPATCHING, W.QUEUED, W.RUNNING, W.CANCELLING)
# Known to the destination: status polling follows these.
FOLLOWED_STATES = (W.QUEUED, W.RUNNING, W.CANCELLING)
# Has not started running yet (queue depth, waits).
WAITING_STATES = (W.SUBMITTED, W.WAITING, W.RESERVED, W.DISPATCHING, W.QUEUED)

LIVE_RESERVATION_STATES = (R.ACTIVE, R.CONFIRMED)
ENDED_RESERVATION_STATES = (R.RELEASED, R.EXPIRED)

# An attempt whose outcome is not known: its job may exist at the destination.
LIVE_ATTEMPT_STATES = (A.STARTED, A.UNKNOWN)

UNRESOLVED_ESCALATION_STATES = (E.OPEN, E.ACKNOWLEDGED)

# --- the tables: state -> the states that may follow it --------------------------------
WORKLOAD_TRANSITIONS: Mapping[str, frozenset[str]] = {
    W.SUBMITTED: frozenset({W.WAITING, W.RESERVED, W.REJECTED, W.CANCELLED}),
    # waiting -> waiting: placement looked again and the reason changed
    W.WAITING: frozenset({W.WAITING, W.RESERVED, W.REJECTED, W.CANCELLED}),
    W.RESERVED: frozenset({W.DISPATCHING, W.WAITING, W.CANCELLED}),
    W.DISPATCHING: frozenset({W.QUEUED, W.WAITING, W.CANCELLING, W.FAILED}),
    # queued -> waiting: held there by a local policy too long, or another destination could
    # start it now: cancelled there and placed again
    W.QUEUED: frozenset({W.RUNNING, W.CANCELLING, W.COMPLETED, W.FAILED, W.CANCELLED, W.WAITING}),
    # running -> queued: its destination stopped it and queued it again (preempted or evicted
    # there); running -> waiting: preempted where nothing queues it again: placed again
    W.RUNNING: frozenset({W.CANCELLING, W.COMPLETED, W.FAILED, W.CANCELLED, W.QUEUED, W.WAITING}),
    W.CANCELLING: frozenset({W.CANCELLED, W.COMPLETED, W.FAILED}),
    W.COMPLETED: frozenset(),
    W.FAILED: frozenset(),
    W.CANCELLED: frozenset(),
    W.REJECTED: frozenset(),
}

RESERVATION_TRANSITIONS: Mapping[str, frozenset[str]] = {
    R.ACTIVE: frozenset({R.CONFIRMED, R.RELEASED, R.EXPIRED}),
    R.CONFIRMED: frozenset({R.RELEASED}),
    R.RELEASED: frozenset(),
    R.EXPIRED: frozenset(),
}

ATTEMPT_TRANSITIONS: Mapping[str, frozenset[str]] = {
    A.STARTED: frozenset({A.ACCEPTED, A.ADOPTED, A.REJECTED, A.NOT_SENT, A.UNKNOWN}),
    # a later attempt found the job: the unanswered one is the one that created it
    A.UNKNOWN: frozenset({A.ACCEPTED}),
    A.ACCEPTED: frozenset(),
    A.ADOPTED: frozenset(),
    A.REJECTED: frozenset(),
    A.NOT_SENT: frozenset(),
}

ESCALATION_TRANSITIONS: Mapping[str, frozenset[str]] = {
    E.OPEN: frozenset({E.ACKNOWLEDGED, E.RESOLVED}),
    E.ACKNOWLEDGED: frozenset({E.RESOLVED}),
    E.RESOLVED: frozenset(),
}

QUOTA_REQUEST_TRANSITIONS: Mapping[str, frozenset[str]] = {
    Q.PENDING: frozenset({Q.APPROVED, Q.REFUSED}),
    Q.APPROVED: frozenset({Q.ENDED}),
    Q.REFUSED: frozenset(),
    Q.ENDED: frozenset(),
}

DELIVERY_TRANSITIONS: Mapping[str, frozenset[str]] = {
    # pending -> pending: a webhook attempt failed and another follows
    D.PENDING: frozenset({D.PENDING, D.DELIVERED, D.FAILED}),
    D.DELIVERED: frozenset(),
    D.FAILED: frozenset(),
}

RELEASE_TRANSITIONS: Mapping[str, frozenset[str]] = {
    P.DRAFT: frozenset({P.PROPOSED, P.RETIRED}),
    P.PROPOSED: frozenset({P.APPROVED, P.RETIRED}),
    P.APPROVED: frozenset({P.ACTIVE, P.RETIRED}),
    P.ACTIVE: frozenset({P.RETIRED}),
    # rollback: an earlier version, once active or approved, may be made active again
    P.RETIRED: frozenset({P.ACTIVE}),
}

IMPACT_TRANSITIONS: Mapping[str, frozenset[str]] = {
    IR.QUEUED: frozenset({IR.RUNNING, IR.FAILED}),
    IR.RUNNING: frozenset({IR.DONE, IR.FAILED}),
    IR.DONE: frozenset(),
    IR.FAILED: frozenset(),
}

# The states a row may be created in: anything else is reached through the table.
INITIAL_STATES: Mapping[str, tuple[str, ...]] = {
    # queued: adopted from a MultiKueue manager that had already admitted it to its queue
    "broker.Workload": (W.SUBMITTED, W.QUEUED),
    "broker.Reservation": (R.ACTIVE,),
    "broker.DispatchAttempt": (A.STARTED,),
    "broker.Escalation": (E.OPEN,),
    "broker.QuotaRequest": (Q.PENDING,),
    "broker.Notification": (D.PENDING,),
    "policyrelease.PolicyRelease": (P.DRAFT,),
    "policyrelease.ImpactReplay": (IR.QUEUED,),
}

# The table of each kind, by the model's label (app_label.ModelName).
TABLES: Mapping[str, Mapping[str, frozenset[str]]] = {
    "broker.Workload": WORKLOAD_TRANSITIONS,
    "broker.Reservation": RESERVATION_TRANSITIONS,
    "broker.DispatchAttempt": ATTEMPT_TRANSITIONS,
    "broker.Escalation": ESCALATION_TRANSITIONS,
    "broker.QuotaRequest": QUOTA_REQUEST_TRANSITIONS,
    "broker.Notification": DELIVERY_TRANSITIONS,
    "policyrelease.PolicyRelease": RELEASE_TRANSITIONS,
    "policyrelease.ImpactReplay": IMPACT_TRANSITIONS,
}


def allowed(table: Mapping[str, frozenset[str]], before: str, after: str) -> bool:
    return after in table.get(before, frozenset())


def sources(table: Mapping[str, frozenset[str]], after: str) -> tuple[str, ...]:
    """Every state the table lets move to ``after``, in the table's order."""
    return tuple(before for before, nexts in table.items() if after in nexts)
