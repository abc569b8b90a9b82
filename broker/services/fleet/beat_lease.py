"""The one beat: a lease in the database that the running Celery beat renews on every tick;
another beat (started by mistake, or a second replica) finds it held and schedules nothing
until the holder stops renewing it for ``ttl_s``.  In the database, so it holds on SQLite and
PostgreSQL alike and needs nothing else running."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import Q

from broker import runtime
from broker.models import BeatLease


def beat_lease_take(*, name: str, holder: str, ttl_s: float, now: datetime | None = None) -> bool:
    """Take or renew the lease ``name`` for ``holder`` until now + ``ttl_s``; False while
    another holder's lease runs.  One conditional UPDATE: two beats never both win."""
    now = now or runtime.now()
    until = now + timedelta(seconds=ttl_s)
    with transaction.atomic():
        taken = BeatLease.objects.filter(Q(holder=holder) | Q(expires_at__lt=now), name=name).update(
            holder=holder, expires_at=until
        )
        if taken:
            return True
    try:
        with transaction.atomic():
            BeatLease.objects.create(name=name, holder=holder, expires_at=until)
            return True
    except IntegrityError:  # there is a lease and it is someone else's
        return False


def beat_lease_holder(*, name: str) -> BeatLease | None:
    return BeatLease.objects.filter(name=name).first()


def beat_lease_release(*, name: str, holder: str) -> None:
    """A beat that stops hands the lease on at once instead of after ``ttl_s``."""
    BeatLease.objects.filter(name=name, holder=holder).delete()
