"""Writes of the policy lifecycle: seed, propose, import, approve, activate, retire, roll back.

Every move goes through ``_move``, which checks the transition table, adds one
PolicyTransition row and one audit record.  Content is never changed after creation.
"""

from __future__ import annotations

from pathlib import Path

from django.contrib.auth.models import User
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max

from broker.placement.policy_loader import policy_version
from broker.lifecycle import RELEASE_TRANSITIONS, allowed
from broker.policyrelease.models import PolicyRelease, PolicyTransition, ReleaseState
from broker.policyrelease.validation import check_policy
from broker.services.records import moves
from broker.services.records.audit import audit
from broker import runtime
from portal.tenancy.errors import DomainError

S = ReleaseState
_STAMP: dict[str, str] = {
    S.PROPOSED: "proposed_at",
    S.APPROVED: "approved_at",
    S.ACTIVE: "activated_at",
    S.RETIRED: "retired_at",
}


class ReleaseRefused(DomainError, ValueError):
    """A lifecycle step that is not allowed; ``field`` names what is wrong.  A conflict with the
    release's state (409), except a refused approver: that is who, not what (403)."""

    status = 409
    code = "refused"

    def __init__(self, field: str, message: str):
        self.field = field
        if field == "approver":
            self.status, self.code = 403, "permission_denied"
        super().__init__(message)


def _move(release: PolicyRelease, to: str, *, actor: User | None, message: str = "") -> PolicyRelease:
    if not allowed(RELEASE_TRANSITIONS, release.state, to):
        raise ReleaseRefused("state", f"version {release.number} is {release.state}; it cannot become {to}")
    before = release.state
    fields: dict[str, object] = {_STAMP[to]: runtime.now()}
    if to == S.ACTIVE:
        fields["was_active"] = True
    if not moves.release_move(to=to, from_=(before,), pk=release.id, actor=actor, fields=fields, note=None):
        raise ReleaseRefused("state", f"version {release.number} changed meanwhile; look again")
    release.refresh_from_db()
    PolicyTransition.objects.create(
        release=release, from_state=before, to_state=to, actor=_user(actor), message=message[:300]
    )
    audit(
        action=f"policy.{to}",
        actor=actor,
        policy_version=release.version,
        message=f"v{release.number}: {before} -> {to}" + (f" ({message})" if message else ""),
    )
    return release


def _user(actor: User | None) -> User | None:
    return actor if actor is not None and actor.pk else None


def _create(
    *, content: str, actor: User | None, owner: User | None = None, summary: str = "", source: str = ""
) -> PolicyRelease:
    check_policy(content)
    number = (PolicyRelease.objects.aggregate(n=Max("number"))["n"] or 0) + 1
    release = PolicyRelease.objects.create(
        number=number,
        content=content,
        version=policy_version(content),
        summary=summary[:300],
        source=source[:300],
        author=_user(actor),
        owner=owner,
    )
    PolicyTransition.objects.create(release=release, from_state="", to_state=S.DRAFT, actor=_user(actor))
    audit(
        action="policy.draft",
        actor=actor,
        policy_version=release.version,
        message=f"v{number} created" + (f" from {source}" if source else ""),
    )
    return release


@transaction.atomic
def release_seed_from_file(*, path: Path | None = None) -> PolicyRelease:
    """The first version, from GPUBROKER_POLICY_FILE, active at once; a no-op once any exists."""
    existing = PolicyRelease.objects.select_for_update().filter(state=S.ACTIVE).first()
    if existing is not None or PolicyRelease.objects.exists():
        newest = existing or PolicyRelease.objects.order_by("-number").first()
        assert newest is not None  # one exists
        return newest
    path = Path(path or settings.GPUBROKER_POLICY_FILE)
    release = _create(
        content=path.read_text(encoding="utf-8"), actor=None, source=str(path), summary="seeded from the policy file"
    )
    for step in (S.PROPOSED, S.APPROVED, S.ACTIVE):
        _move(release, step, actor=None, message="seed")
    return release


@transaction.atomic
def release_import(*, actor: User | None, content: str, source: str = "", summary: str = "") -> PolicyRelease:
    """A version from a file, as a draft: it still goes through proposal and approval."""
    return _create(content=content, actor=actor, source=source, summary=summary or f"imported from {source}")


@transaction.atomic
def release_propose(*, actor: User, content: str, owner: User, summary: str = "") -> PolicyRelease:
    if owner is None:
        raise ReleaseRefused("owner", "name the owner who is to approve this version")
    if owner.pk == getattr(actor, "pk", None):
        raise ReleaseRefused("owner", "the owner approves the version, so it must be someone other than you")
    if not (owner.is_active and owner.is_staff):
        raise ReleaseRefused("owner", f"{owner.get_username()} is not an active platform operator")
    release = _create(content=content, actor=actor, owner=owner, summary=summary)
    return _move(release, S.PROPOSED, actor=actor, message=f"owner {owner.get_username()}")


@transaction.atomic
def release_approve(*, actor: User, release_id: int) -> PolicyRelease:
    release = PolicyRelease.objects.select_for_update().get(id=release_id)
    if release.author_id is not None and release.author_id == getattr(actor, "pk", None):
        raise ReleaseRefused(
            "approver",
            "you proposed this version; only its owner "
            f"({release.owner.get_username() if release.owner else 'none named'}) may approve it",
        )
    if release.owner_id != getattr(actor, "pk", None):
        raise ReleaseRefused("approver", "only the owner named on this version may approve it")
    release.approver = actor
    release.save(update_fields=["approver"])
    return _move(release, S.APPROVED, actor=actor)


@transaction.atomic
def release_activate(*, actor: User, release_id: int) -> PolicyRelease:
    """Put an approved version (or, as a rollback, an earlier active one) in force, in one
    transaction: the version in force is retired in the same step."""
    release = PolicyRelease.objects.select_for_update().get(id=release_id)
    if release.state == S.RETIRED and not release.was_active:
        raise ReleaseRefused("state", f"version {release.number} was never in force; propose it again")
    if release.state not in (S.APPROVED, S.RETIRED):
        raise ReleaseRefused(
            "state",
            f"version {release.number} is {release.state}; only an approved "
            "version, or one in force before, can be activated",
        )
    current = PolicyRelease.objects.select_for_update().filter(state=S.ACTIVE).first()
    rollback = release.state == S.RETIRED
    if current is not None:
        _move(current, S.RETIRED, actor=actor, message=f"replaced by v{release.number}")
    try:
        with transaction.atomic():
            return _move(
                release,
                S.ACTIVE,
                actor=actor,
                message=f"rollback from v{current.number}" if rollback and current else "",
            )
    except IntegrityError:  # another activation won the race: ours rolls back whole
        raise ReleaseRefused("state", "another version was activated at the same time; try again") from None


def release_rollback(*, actor: User, release_id: int) -> PolicyRelease:
    return release_activate(actor=actor, release_id=release_id)


@transaction.atomic
def release_withdraw(*, actor: User, release_id: int) -> PolicyRelease:
    """A draft, proposed or approved version that will not be used."""
    release = PolicyRelease.objects.select_for_update().get(id=release_id)
    if release.state == S.ACTIVE:
        raise ReleaseRefused("state", "the version in force is retired by activating another")
    return _move(release, S.RETIRED, actor=actor, message="withdrawn")
