"""GPU-hour budgets as the policy states them and where one stands: the periods, the figures
a refusal gives, the forecast, and the policy's errors naming the key."""
from __future__ import annotations

from datetime import date, datetime, timezone
from decimal import Decimal

import pytest

from broker.placement.budgets import Budget, Standing, elapsed_share, period_bounds
from broker.placement.policy import PolicyError
from broker.placement.policy_loader import load_policy

D = Decimal


def at(*args: int) -> datetime:
    return datetime(*args, tzinfo=timezone.utc)


def standing(kind="hard", used="0", held="0", asked="0", elapsed=0.5, hours="100", warn=0.8) -> Standing:
    budget = Budget(tenant="physics", gpu_class="a100", gpu_hours=D(hours), kind=kind, warn_share=warn)
    return Standing(budget=budget, start=date(2026, 11, 1), end=date(2026, 12, 1), used_hours=D(used),
                    held_hours=D(held), asked_hours=D(asked), elapsed=elapsed)


@pytest.mark.parametrize("period, moment, bounds", [
    ("month", at(2026, 11, 30, 23, 59), ("2026-11-01", "2026-12-01")),
    ("month", at(2026, 12, 31, 12), ("2026-12-01", "2027-01-01")),
    ("quarter", at(2026, 11, 5), ("2026-10-01", "2027-01-01")),
    ("quarter", at(2027, 1, 1), ("2027-01-01", "2027-04-01")),
    ("quarter", at(2027, 6, 30), ("2027-04-01", "2027-07-01")),
])
def test_a_period_runs_from_its_first_day_to_the_next_periods_in_utc(period, moment, bounds):
    start, end = period_bounds(period, moment)
    assert (start.isoformat(), end.isoformat()) == bounds


def test_half_of_november_has_passed_at_its_sixteenth_midnight():
    assert elapsed_share(date(2026, 11, 1), date(2026, 12, 1), at(2026, 11, 16)) == 0.5
    assert elapsed_share(date(2026, 11, 1), date(2026, 12, 1), at(2027, 1, 1)) == 1.0


def test_a_hard_budget_refuses_what_would_pass_it_and_says_by_how_much():
    s = standing(used="60", held="30", asked="16")
    assert s.over and s.refuses and s.remaining_hours == D("10")
    assert s.words() == ("hard budget physics a100 per month (2026-11-01 to 2026-12-01): 100.00 GPU-hours; "
                         "used 60.00, held by queued and running work 30.00, this job asks 16.00: 6.00 over")
    assert not standing(used="60", held="30", asked="10").over  # exactly at it: not past


def test_a_soft_budget_never_refuses_and_both_warn_at_their_share():
    soft = standing(kind="soft", used="99", asked="50")
    assert soft.over and not soft.refuses
    assert standing(used="70", asked="10").warns and not standing(used="70", asked="9").warns
    assert standing(used="40", warn=0.4).warns


def test_the_forecast_runs_the_pace_so_far_to_the_periods_end_never_below_what_is_held():
    assert standing(used="30", elapsed=0.25).forecast_hours == D("120.00")
    assert standing(used="30", elapsed=0.25).forecast_over
    assert standing(used="10", held="50", elapsed=0.5).forecast_hours == D("60")
    assert standing(used="0", held="5", elapsed=0.0).forecast_hours == D("5")


POLICY = """
gpu_classes:
  a100: {models: [A100]}
budgets:
  - {tenant: physics, gpu_class: a100, gpu_hours: 1000}
  - {tenant: physics, project: lattice, gpu_class: a100, period: quarter, gpu_hours: 250.5, kind: soft, warn_share: 0.9}
"""


def test_the_policy_lists_budgets_with_their_defaults_and_finds_those_covering_a_workload():
    policy = load_policy(POLICY)
    whole, lattice = policy.budgets
    assert (whole.period, whole.kind, whole.warn_share, whole.gpu_hours) == ("month", "hard", 0.8, D("1000.00"))
    assert (lattice.project, lattice.gpu_hours, lattice.name) == ("lattice", D("250.50"),
                                                                  "physics/lattice a100 per quarter")
    assert policy.budgets_for(tenant="physics", project="lattice", gpu_class="a100") == (whole, lattice)
    assert policy.budgets_for(tenant="physics", project="qcd", gpu_class="a100") == (whole,)
    assert policy.budgets_for(tenant="biology", project="lattice", gpu_class="a100") == ()


@pytest.mark.parametrize("entry, key, words", [
    ("{tenant: physics, gpu_class: a100, gpu_hours: 10, colour: red}", "budgets[0].colour", "unknown key"),
    ("{tenant: physics, gpu_class: a100}", "budgets[0].gpu_hours", "is required"),
    ("{tenant: physics, gpu_class: v100, gpu_hours: 10}", "budgets[0].gpu_class", "unknown GPU class 'v100'"),
    ("{tenant: physics, gpu_class: a100, gpu_hours: 0}", "budgets[0].gpu_hours", "more than 0"),
    ("{tenant: physics, gpu_class: a100, gpu_hours: ten}", "budgets[0].gpu_hours", "must be a number"),
    ("{tenant: physics, gpu_class: a100, gpu_hours: 10, period: week}", "budgets[0].period", "one of month, quarter"),
    ("{tenant: physics, gpu_class: a100, gpu_hours: 10, kind: firm}", "budgets[0].kind", "one of hard, soft"),
    ("{tenant: physics, gpu_class: a100, gpu_hours: 10, warn_share: 2}", "budgets[0].warn_share", "at most 1"),
])
def test_a_bad_budget_is_refused_naming_its_key(entry, key, words):
    with pytest.raises(PolicyError) as caught:
        load_policy(f"gpu_classes:\n  a100: {{models: [A100]}}\nbudgets:\n  - {entry}\n")
    assert caught.value.key == key and words in str(caught.value)


def test_two_budgets_for_the_same_tenant_class_and_period_are_refused():
    twice = "  - {tenant: physics, gpu_class: a100, gpu_hours: 10}\n"
    with pytest.raises(PolicyError) as caught:
        load_policy("gpu_classes:\n  a100: {models: [A100]}\nbudgets:\n" + twice * 2)
    assert caught.value.key == "budgets[1]" and "a second budget for physics a100 per month" in str(caught.value)
