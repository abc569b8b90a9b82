"""The policy's ``multikueue`` section: the admission time of a nomination and how many
workers one nomination lists (broker as MultiKueue's external dispatcher)."""
from __future__ import annotations

import pytest

from broker.placement import PolicyError, load_policy


def test_without_the_section_one_worker_has_five_minutes():
    policy = load_policy("version: 1\n")
    assert (policy.multikueue.admission_timeout_s, policy.multikueue.nominate) == (300.0, 1)


def test_the_section_sets_the_admission_time_and_the_short_list():
    policy = load_policy("multikueue:\n  admission_timeout_s: 90\n  nominate: 3\n")
    assert (policy.multikueue.admission_timeout_s, policy.multikueue.nominate) == (90.0, 3)


@pytest.mark.parametrize(("text", "key"), [
    ("multikueue:\n  nominate: 21\n", "multikueue.nominate"),        # Kueue keeps at most 20
    ("multikueue:\n  nominate: 1.5\n", "multikueue.nominate"),
    ("multikueue:\n  admission_timeout_s: 0\n", "multikueue.admission_timeout_s"),
    ("multikueue:\n  timeout: 5\n", "multikueue.timeout"),
    ("multikueue: 5\n", "multikueue"),
])
def test_a_bad_value_is_refused_naming_its_key(text, key):
    with pytest.raises(PolicyError) as err:
        load_policy(text)
    assert err.value.key == key
