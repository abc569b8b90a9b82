"""How two plays of one job list are compared: order with ties, start error, jobs that went
ahead, queue reasons."""
from __future__ import annotations

from broker.calibration.compare import compare, percentile, spread, started_ahead
from broker.calibration.played import Observed, Played


def _played(starts: dict[str, float | None], reasons=None, submitted=None) -> Played:
    submitted = submitted or {}
    return Played(side="x", jobs={n: Observed(n, submitted.get(n, 0.0), s, None if s is None else s + 5, "completed")
                                  for n, s in starts.items()}, reasons=reasons or {})


def test_a_pair_in_the_other_order_disagrees_unless_within_a_cycle():
    real = _played({"a": 0.0, "b": 10.0, "c": 20.0})
    sim = _played({"a": 0.0, "b": 21.0, "c": 19.0})  # b and c swapped, 2 s apart
    assert compare(real, sim, cycle_s=2.0).pair_order == 1.0  # tied on the simulator's side
    assert compare(real, sim, cycle_s=1.0).pair_order == 2 / 3


def test_start_errors_are_absolute_per_job():
    got = compare(_played({"a": 0.0, "b": 10.0, "c": 20.0}), _played({"a": 3.0, "b": 8.0, "c": 20.0}), cycle_s=1.0)
    assert got.errors_s == {"a": 3.0, "b": 2.0, "c": 0.0}
    assert (got.median_abs_error_s, got.p95_abs_error_s) == (2.0, 3.0)


def test_reasons_agree_only_where_both_sides_wait_for_the_same_reason():
    real = _played({"a": 0.0}, reasons={1.0: {"a": "capacity", "b": "capacity"}, 2.0: {"a": "policy"}})
    sim = _played({"a": 0.0}, reasons={1.0: {"a": "capacity"}, 2.0: {"a": "policy"}})
    got = compare(real, sim, cycle_s=1.0)
    assert (got.reason_samples, got.reason_agreement) == (3, 2 / 3)  # b waits on one side only


def test_a_job_started_before_an_earlier_one_went_ahead():
    played = _played({"first": 30.0, "second": 5.0, "third": 31.0}, submitted={"first": 0.0, "second": 1.0,
                                                                               "third": 2.0})
    assert started_ahead(played, 2.0) == ("second",)


def test_percentile_and_spread_of_repetitions():
    assert percentile([1.0, 2.0, 3.0, 4.0, 100.0], 0.95) == 100.0 and percentile([], 0.5) == 0.0
    assert spread([0.9, 1.0, 0.95]) == "0.95 (0.90-1.00)" and spread([]) == "-"
