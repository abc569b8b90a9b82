"""The one beat's lease: one holder at a time, renewed by its holder, taken over once it
runs out, handed on at once when its holder stops."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from broker.services.fleet.beat_lease import beat_lease_holder, beat_lease_release, beat_lease_take

T0 = datetime(2026, 12, 4, 6, 0, tzinfo=UTC)


@pytest.mark.django_db
def test_a_second_beat_is_refused_while_the_first_renews_and_takes_over_when_it_stops():
    assert beat_lease_take(name="beat", holder="a", ttl_s=30, now=T0)
    assert not beat_lease_take(name="beat", holder="b", ttl_s=30, now=T0 + timedelta(seconds=1))
    assert beat_lease_take(name="beat", holder="a", ttl_s=30, now=T0 + timedelta(seconds=20))  # renewed
    assert not beat_lease_take(name="beat", holder="b", ttl_s=30, now=T0 + timedelta(seconds=45))
    # a stops renewing: its lease runs out 30 s after its last renewal
    assert beat_lease_take(name="beat", holder="b", ttl_s=30, now=T0 + timedelta(seconds=51))
    assert beat_lease_holder(name="beat").holder == "b"
    assert not beat_lease_take(name="beat", holder="a", ttl_s=30, now=T0 + timedelta(seconds=52))


@pytest.mark.django_db
def test_a_beat_that_stops_hands_the_lease_on_at_once_and_only_its_own():
    beat_lease_take(name="beat", holder="a", ttl_s=30, now=T0)
    beat_lease_release(name="beat", holder="b")  # not b's to release
    assert not beat_lease_take(name="beat", holder="b", ttl_s=30, now=T0)
    beat_lease_release(name="beat", holder="a")
    assert beat_lease_take(name="beat", holder="b", ttl_s=30, now=T0)
