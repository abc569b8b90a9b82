"""The baselines added to keep the comparison fair: MultiKueue's incremental dispatcher,
the clairvoyant FIFO (known run times; a baseline, not a bound), backfilling local queues, and
the tuning/held-out split."""
from __future__ import annotations

from broker.replay.baselines import MultiKueueIncremental
from broker.replay.clairvoyant import ClairvoyantFifo
from broker.replay.runner import window_of
from tests.broker.replay.test_baselines import TWIN_FLEET, job, replay


def test_incremental_dispatcher_offers_on_prem_first_and_the_cloud_one_round_later():
    # east (on-prem) is full until t=1000: the job is offered to west (cloud) at t=300
    jobs = [job("busy-east", 0, gpus=4, duration=1000), job("late", 0, gpus=4)]
    run, _ = replay(TWIN_FLEET, jobs, MultiKueueIncremental())
    late = run.outcomes["late"]
    assert (late.cluster, late.start_s, late.copies) == ("west", 300, 2)


def test_incremental_dispatcher_keeps_a_job_on_prem_when_it_is_admitted_there_at_once():
    run, _ = replay(TWIN_FLEET, [job("only", 0)], MultiKueueIncremental())
    assert (run.outcomes["only"].cluster, run.outcomes["only"].copies) == ("east", 1)


def test_clairvoyant_fifo_starts_each_job_where_it_fits_at_once_and_never_holds_it_at_a_cluster():
    jobs = [job("busy-east", 0, gpus=4, duration=1000), job("busy-west", 0, gpus=4, duration=300),
            job("late", 5, gpus=4)]
    run, _ = replay(TWIN_FLEET, jobs, ClairvoyantFifo())
    late = run.outcomes["late"]
    assert (late.cluster, late.start_s) == ("west", 300)
    assert not any(o.held_at_destination for o in run.outcomes.values())


def test_clairvoyant_fifo_backfills_a_short_job_but_not_one_that_would_delay_the_reserved_gang():
    jobs = [job("busy-east", 0, gpus=3, duration=1000), job("busy-west", 0, gpus=3, duration=1000),
            job("gang", 1, gpus=2, workers=2),            # needs a whole node: reserved at 1000
            job("short", 2, gpus=1, duration=500),        # ends before 1000: backfilled
            job("long", 3, gpus=1, duration=5000)]        # runs past the reservation
    run, _ = replay(TWIN_FLEET, jobs, ClairvoyantFifo())
    out = run.outcomes
    assert out["gang"].start_s == 1000
    assert out["short"].start_s == 2
    # the gang is reserved on one cluster; the long job waits or runs on the other one
    assert out["long"].cluster != out["gang"].cluster or out["long"].start_s >= 1000


def test_the_windows_split_the_jobs_in_arrival_order_and_rebase_the_second_half():
    jobs = [job(f"j{i}", 100 + 10 * i) for i in range(5)]
    first, second = window_of(jobs, "first"), window_of(jobs, "second")
    assert [j.key for j in first] == ["j0", "j1"]
    assert [(j.key, j.submit_s) for j in second] == [("j2", 0), ("j3", 10), ("j4", 20)]
    assert window_of(jobs, "all") == jobs


def test_the_broker_replay_reports_its_wait_estimators_error(transactional_db, fragmented_fleet):
    from broker.replay.runner import run_one  # noqa: PLC0415
    from tests.broker.replay.test_baselines import FRAGMENTING  # noqa: PLC0415
    m = run_one("default", FRAGMENTING, fragmented_fleet, seed=1)
    assert m.extra["estimator n"] == len(FRAGMENTING)
    assert m.extra["estimator p90 s"] >= m.extra["estimator p50 s"] >= 0


def test_burst_variants_are_known_policy_names():
    from broker.replay.runner import is_known  # noqa: PLC0415
    assert is_known("default+burst30m") and is_known("clairvoyant-fifo") and is_known("multikueue-incremental")
    assert is_known("oracle")  # the old name, still accepted (mapped to clairvoyant-fifo)
    assert not is_known("default+burst") and not is_known("nonsense")
