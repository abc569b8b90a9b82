"""The queue-wait estimator learned from observed starts (pure, no database)."""
from __future__ import annotations

import pytest

from broker.placement.wait_estimator import EstimatorReport, WaitEstimator, error_summary, estimator_report

KEY = ("onprem-slurm", "a100-80gb")


def test_without_observations_the_prior_is_the_estimate():
    est = WaitEstimator()
    assert est.predict_s(KEY, 0.0, pending_gpus=8, gpus=1, prior_s=1800, cap_s=86400) == 1800


def test_recent_waits_count_more_than_old_ones():
    est = WaitEstimator(half_life_s=3600)
    est.observe(KEY, started_s=0, wait_s=1000, gpus=1)
    est.observe(KEY, started_s=3600, wait_s=0, gpus=1)   # the old one now weighs half
    assert est.mean_wait_s(KEY, 3600) == pytest.approx(1000 / 3)


def test_observations_out_of_order_give_the_same_mean():
    a, b = WaitEstimator(half_life_s=3600), WaitEstimator(half_life_s=3600)
    a.observe(KEY, 0, 1000, 1)
    a.observe(KEY, 3600, 0, 1)
    b.observe(KEY, 3600, 0, 1)
    b.observe(KEY, 0, 1000, 1)
    assert a.mean_wait_s(KEY, 3600) == pytest.approx(b.mean_wait_s(KEY, 3600))


def test_a_queue_that_drains_faster_predicts_a_shorter_wait():
    fast, slow = WaitEstimator(half_life_s=7200), WaitEstimator(half_life_s=7200)
    for i in range(10):
        fast.observe(KEY, started_s=i * 360, wait_s=0, gpus=8)   # 80 GPUs an hour
        slow.observe(KEY, started_s=i * 360, wait_s=0, gpus=1)   # 10 GPUs an hour
    now = 3600
    f = fast.predict_s(KEY, now, pending_gpus=16, gpus=4, prior_s=0, cap_s=1e9)
    s = slow.predict_s(KEY, now, pending_gpus=16, gpus=4, prior_s=0, cap_s=1e9)
    assert 0 < f < s


def test_nothing_queued_predicts_the_recent_mean_wait():
    est = WaitEstimator()
    est.observe(KEY, 100, 240, 2)
    assert est.predict_s(KEY, 200, pending_gpus=0, gpus=1, prior_s=9999, cap_s=1e9) == 240


def test_error_summary_reports_mean_and_percentiles_of_absolute_error():
    summary = error_summary([(100, 0), (0, 300), (50, 50), (1000, 0)])
    assert summary is not None
    assert (summary.count, summary.mean_abs_s) == (4, 350)
    assert (summary.p50_abs_s, summary.p90_abs_s) == (100, 1000)
    assert summary.mean_signed_s == pytest.approx((100 - 300 + 0 + 1000) / 4)
    assert error_summary([]) is None


def test_the_error_report_splits_the_error_per_cluster_and_pool():
    rows = [("slurm", "a100", 600.0, 0.0), ("slurm", "a100", 0.0, 0.0), ("cloud", "h100", 0.0, 300.0)]
    report = estimator_report(rows)
    assert report is not None
    assert report.overall.count == 3 and report.overall.mean_abs_s == pytest.approx(300)
    per = {(d.cluster, d.pool): d.summary for d in report.by_destination}
    assert per[("slurm", "a100")].mean_abs_s == 300 and per[("slurm", "a100")].mean_signed_s == 300
    assert per[("cloud", "h100")].mean_signed_s == -300  # it expected shorter waits there
    assert estimator_report([]) is None


def test_the_error_report_survives_its_stored_form():
    report = estimator_report([("slurm", "a100", 120.0, 60.0), ("cloud", "h100", 0.0, 30.0)])
    assert report is not None
    assert EstimatorReport.from_dict(report.to_dict()) == report
    with pytest.raises(KeyError):
        EstimatorReport.from_dict({"overall": {"count": 1}})
