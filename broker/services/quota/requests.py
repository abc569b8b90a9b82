"""Quota requests: a researcher asks for more GPUs of a class for a project until an end
date; the quota's owner approves (the limit rises) or refuses, with a note; after the end
date the beat task takes the extra GPUs back.  Every step is audited with the request's id.

The clock is a parameter (``now=``) so the end of a raise can be driven in tests.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from datetime import timezone as dt_timezone

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from broker.models import GpuClass, Quota, QuotaRequest, QuotaRequestState
from broker.selectors.quota_requests import can_decide, quota_request_get
from broker.services.records import moves
from broker.services.records.audit import audit
from portal.tenancy.models import Project, Role
from portal.tenancy.errors import DomainError
from portal.tenancy.selectors import project_get
from broker import runtime

QUOTA_MAX_GPUS = 1_000_000  # as the quota form: more is a typo, not a request
MAX_DAYS_AHEAD = 366  # a raise for longer than a year is a change of the quota, not a request


class QuotaRequestRefused(DomainError, ValueError):
    """Bad input or a decision that may not be taken; ``field`` names what to fix."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(message)


class OwnRequest(DomainError, PermissionDenied):
    """The requester tried to decide their own request (even as the quota's owner).  Still a
    PermissionDenied, so a caller that does not catch it answers Django's 403."""

    status = 403
    code = "permission_denied"


def _today(now: datetime) -> date:
    return timezone.localdate(now, dt_timezone.utc) if timezone.is_aware(now) else now.date()


def quota_request_create(
    *,
    user: User,
    project_id: int,
    gpu_class: str,
    extra_gpus: int,
    reason: str,
    ends_on: date,
    now: datetime | None = None,
) -> QuotaRequest:
    now = now or runtime.now()
    project = project_get(user=user, project_id=project_id, roles=(Role.RESEARCHER,))
    klass = GpuClass.objects.filter(slug=gpu_class).first()
    if klass is None:
        raise QuotaRequestRefused("gpu_class", f"unknown GPU class {gpu_class!r}.")
    quota = Quota.objects.filter(tenant_id=project.tenant_id, gpu_class=klass).first()
    if quota is None:
        raise QuotaRequestRefused("gpu_class", f"{project.tenant.name} has no quota for {klass.slug} to raise.")
    if not 1 <= extra_gpus <= QUOTA_MAX_GPUS:
        raise QuotaRequestRefused("extra_gpus", f"must be between 1 and {QUOTA_MAX_GPUS}.")
    if not reason.strip():
        raise QuotaRequestRefused("reason", "say what the GPUs are for.")
    today = _today(now)
    if not today <= ends_on <= today + timedelta(days=MAX_DAYS_AHEAD):
        raise QuotaRequestRefused("ends_on", f"must be between today ({today}) and {MAX_DAYS_AHEAD} days ahead.")
    return _store(
        user=user, project=project, quota=quota, extra_gpus=extra_gpus, reason=reason.strip(), ends_on=ends_on
    )


@transaction.atomic
def _store(*, user: User, project: Project, quota: Quota, extra_gpus: int, reason: str, ends_on: date) -> QuotaRequest:
    request = QuotaRequest.objects.create(
        quota=quota, project=project, requester=user, extra_gpus=extra_gpus, reason=reason, ends_on=ends_on
    )
    _audit(
        request,
        "quota_request.created",
        user,
        f"{user.username} asks for {extra_gpus} more {quota.gpu_class.slug} GPUs for {project} until {ends_on}: "
        f"{reason[:500]}",
    )
    return request


def quota_request_decide(
    *, user: User, request_id: int, approve: bool, note: str, now: datetime | None = None
) -> QuotaRequest:
    now = now or runtime.now()
    request = quota_request_get(user=user, request_id=request_id)  # 404 for anyone who may not see it
    if request.requester_id == user.pk:
        # stored, not rolled back with the refusal: an attempt to approve one's own request is on record
        _audit(
            request,
            "quota_request.self_decision_refused",
            user,
            f"{user.username} tried to decide their own request; the quota's owner decides it",
        )
        raise OwnRequest("you asked for this; someone else who owns the quota decides it, not you.")
    if not can_decide(user=user, request=request):
        raise PermissionDenied("only the quota's owner decides its requests")
    if not approve and not note.strip():
        raise QuotaRequestRefused("note", "say why it is refused.")
    if approve and request.ends_on < _today(now):
        raise QuotaRequestRefused("decision", f"its end date {request.ends_on} has passed; ask for a new one.")
    return _decide(user=user, request=request, approve=approve, note=note.strip(), now=now)


@transaction.atomic
def _decide(*, user: User, request: QuotaRequest, approve: bool, note: str, now: datetime) -> QuotaRequest:
    if not moves.quota_request_decide(
        approve=approve, pk=request.id, actor=user, fields={"decided_by": user, "decided_at": now, "note": note}
    ):
        raise QuotaRequestRefused("decision", "it has already been decided.")
    quota = request.quota
    if approve:
        Quota.objects.filter(id=quota.id).update(limit_gpus=F("limit_gpus") + request.extra_gpus)
        quota.refresh_from_db()
        _audit(
            request,
            "quota_request.approved",
            user,
            f"approved by {user.username}: {quota.gpu_class.slug} limit raised by {request.extra_gpus} to "
            f"{quota.limit_gpus} until {request.ends_on}" + (f"; note: {note}" if note else ""),
            limit_gpus=quota.limit_gpus,
        )
    else:
        _audit(request, "quota_request.refused", user, f"refused by {user.username}: {note}")
    return QuotaRequest.objects.get(id=request.id)


def quota_requests_end(*, now: datetime | None = None) -> int:
    """Take back the raise of every approved request whose end date has passed (beat task)."""
    now = now or runtime.now()
    ended = 0
    for request_id in QuotaRequest.objects.filter(
        state=QuotaRequestState.APPROVED, ends_on__lt=_today(now)
    ).values_list("id", flat=True):
        ended += _end(request_id=request_id, now=now)
    return ended


@transaction.atomic
def _end(*, request_id: int, now: datetime) -> int:
    if not moves.quota_request_end(pk=request_id, fields={"ended_at": now}):
        return 0  # another pass took it back already
    request = QuotaRequest.objects.select_related("quota__gpu_class").get(id=request_id)
    quota = Quota.objects.select_for_update().get(id=request.quota_id)
    # never below zero: an admin may have lowered the limit by hand while the raise lasted
    quota.limit_gpus = max(0, quota.limit_gpus - request.extra_gpus)
    quota.save(update_fields=["limit_gpus", "updated_at"])
    _audit(
        request,
        "quota_request.ended",
        None,
        f"end date {request.ends_on} passed: {request.quota.gpu_class.slug} limit back to {quota.limit_gpus} "
        "(running jobs keep their GPUs; new ones wait for room)",
        limit_gpus=quota.limit_gpus,
    )
    return 1


def _audit(request: QuotaRequest, action: str, actor: User | None, message: str, **extra: object) -> None:
    audit(
        action=action,
        tenant_id=request.quota.tenant_id,
        actor=actor,
        message=message,
        inputs={
            "request_id": request.id,
            "quota_id": request.quota_id,
            "extra_gpus": request.extra_gpus,
            "ends_on": request.ends_on.isoformat(),
            **extra,
        },
    )
