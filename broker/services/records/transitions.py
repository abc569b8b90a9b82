"""The one writer of ``state`` on workloads, reservations, dispatch attempts and escalations.

A transition is a conditional update: the row moves only if it is still in one of the
states the lifecycle table lets move to the target (and matches the caller's extra
conditions).  A count of 0 means someone else got there first; the caller decides what
that means.  A move the table does not list is a programming error and is refused with
``TransitionRefused`` before anything is written.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from django.contrib.auth.models import User
from django.db import models, transaction

from broker.lifecycle import TABLES, TransitionReason, sources
from broker.models import AuditRecord, Workload
from broker.services.records.audit import audit_record


class TransitionRefused(ValueError):
    """The lifecycle table has no such move (a bug in the caller, never bad input)."""

    def __init__(self, *, kind: str, before: Iterable[str], after: str):
        self.kind, self.before, self.after = kind, tuple(before), after
        super().__init__(f"{kind}: no transition from {', '.join(self.before) or 'nothing'} to {after}")


@dataclass(frozen=True)
class Note:
    """The audit record a transition writes when the row moved (the ``audit`` arguments)."""

    action: str
    workload: Workload | None = None
    tenant_id: int | None = None
    message: str = ""
    cluster: str = ""
    destination_job_id: str = ""
    policy_version: str = ""
    inputs: Mapping[str, object] = field(default_factory=dict)
    score_breakdown: Mapping[str, object] | None = None


def _label(model: type[models.Model]) -> str:
    return model._meta.label


def _sources(model: type[models.Model], to: str, from_: Iterable[str] | None) -> tuple[str, ...]:
    kind = _label(model)
    if kind not in TABLES:
        raise TransitionRefused(kind=kind, before=(), after=to)
    possible = sources(TABLES[kind], to)
    if from_ is None:
        chosen = possible
    else:
        chosen = tuple(from_)
        unlisted = [s for s in chosen if s not in possible]
        if unlisted:
            raise TransitionRefused(kind=kind, before=unlisted, after=to)
    if not chosen:
        raise TransitionRefused(kind=kind, before=(), after=to)
    return chosen


def transition(
    model: type[models.Model],
    pk: int | None = None,
    *,
    to: str,
    reason: TransitionReason,
    actor: User | None = None,
    from_: Iterable[str] | None = None,
    where: Mapping[str, object] | None = None,
    exclude: Mapping[str, object] | None = None,
    fields: Mapping[str, object] | None = None,
    note: Note | None = None,
    then: Callable[[], object] | None = None,
    savepoint: bool = True,
) -> int:
    """Move the row ``pk`` (or the rows matching ``where``) to ``to``; returns how many moved.

    ``from_`` narrows the table's sources for ``to`` (each must be listed); ``fields`` are
    written with the state.  When a row moved: ``then`` runs (effects that belong to the
    move, e.g. releasing the reservation of an ended workload), then ``note`` is written as
    the audit record, with the move and its ``reason`` in its inputs.  ``note=None``: the
    row itself is the record (attempts), or the caller writes none on purpose.
    ``savepoint=False``: inside a caller's transaction that rolls back whole on any error
    (no savepoint round trips on a hot path); never where an error is caught and the
    enclosing transaction carries on."""
    before = _sources(model, to, from_)
    if pk is None and not where:
        raise TransitionRefused(kind=_label(model), before=before, after=to)
    alone = note is None and then is None and not transaction.get_connection().in_atomic_block
    # a lone UPDATE outside any transaction is atomic by itself: no BEGIN/COMMIT round trips
    with contextlib.nullcontext() if alone else transaction.atomic(savepoint=savepoint):
        return _apply(
            model,
            pk,
            before=before,
            to=to,
            reason=reason,
            actor=actor,
            where=where,
            exclude=exclude,
            fields=fields,
            note=note,
            then=then,
        )


def _apply(
    model: type[models.Model],
    pk: int | None,
    *,
    before: tuple[str, ...],
    to: str,
    reason: TransitionReason,
    actor: User | None,
    where: Mapping[str, object] | None,
    exclude: Mapping[str, object] | None,
    fields: Mapping[str, object] | None,
    note: Note | None,
    then: Callable[[], object] | None,
) -> int:
    rows = model._default_manager.filter(state__in=before, **(where or {}))
    if pk is not None:
        rows = rows.filter(pk=pk)
    if exclude:
        rows = rows.exclude(**exclude)
    moved = rows.update(state=to, **(fields or {}))
    if not moved:
        return 0
    if then is not None:
        then()
    if note is not None:
        _record(note, to=to, reason=reason, actor=actor)
    return moved


def _record(note: Note, *, to: str, reason: TransitionReason, actor: User | None) -> None:
    moved_record(note, to=to, reason=reason, actor=actor).save(force_insert=True)


def moved_record(note: Note, *, to: str, reason: TransitionReason, actor: User | None = None) -> AuditRecord:
    """The record a transition writes for ``note`` when its row moved, not saved yet (a chunk
    moved in one update stores its rows' records together with ``audit_many``)."""
    return audit_record(
        action=note.action,
        workload=note.workload,
        tenant_id=note.tenant_id,
        actor=actor,
        message=note.message,
        cluster=note.cluster,
        destination_job_id=note.destination_job_id,
        policy_version=note.policy_version,
        score_breakdown=dict(note.score_breakdown or {}),
        inputs={**note.inputs, "transition": {"to": str(to), "reason": str(reason)}},
    )
