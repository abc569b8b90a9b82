"""Workload creation that a client may retry: one Idempotency-Key, one workload."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Mapping

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from broker.api.models import IdempotencyKey
from broker.models import Workload
from broker.services.submitting.workloads import workload_submit
from portal.tenancy.errors import DomainError


class IdempotencyKeyReused(DomainError, ValueError):
    """The key was first used for a different request body."""

    status = 409
    code = "idempotency_key_reused"
    field = "Idempotency-Key"


@dataclass(frozen=True)
class Submitted:
    workload: Workload
    created: bool  # False: a retry, answered with the workload the first request made


def request_hash(project_id: int, spec_data: Mapping[str, Any]) -> str:
    body = json.dumps({"project": project_id, **spec_data}, sort_keys=True, default=str)
    return hashlib.sha256(body.encode()).hexdigest()


def workload_submit_once(
    *, user: User, project_id: int, spec_data: Mapping[str, Any], idempotency_key: str
) -> Submitted:
    """``workload_submit``, remembered under ``idempotency_key`` for this user.

    The workload and its key are written in one transaction: when two requests race with
    one key, the loser's insert of the key fails on the unique constraint, its workload
    rolls back with it (placement is queued only on commit), and it answers the winner's."""
    digest = request_hash(project_id, spec_data)
    found = _replay(user, idempotency_key, digest)
    if found is not None:
        return found
    try:
        with transaction.atomic():
            workload = workload_submit(user=user, project_id=project_id, spec_data=spec_data)
            IdempotencyKey.objects.create(user=user, key=idempotency_key, request_hash=digest, workload=workload)
    except IntegrityError:
        found = _replay(user, idempotency_key, digest)
        if found is None:
            raise
        return found
    return Submitted(workload=workload, created=True)


def _replay(user: User, key: str, digest: str) -> Submitted | None:
    row = IdempotencyKey.objects.select_related("workload").filter(user=user, key=key).first()
    if row is None:
        return None
    if row.request_hash != digest:
        raise IdempotencyKeyReused("this Idempotency-Key was used for a different request.")
    return Submitted(workload=row.workload, created=False)
