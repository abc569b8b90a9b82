"""Recording what a replay measured of the wait estimator: one row per run, a rerun
replaces it, and the recording is audited."""
from __future__ import annotations

from broker.models import AuditRecord, ReplayEstimate
from broker.services.placing.replay_estimates import ReplayEstimateRun, record_replay_estimates
from broker.placement.wait_estimator import estimator_report


def _run(predicted: float, *, jobs: int = 40) -> ReplayEstimateRun:
    report = estimator_report([("onprem-slurm", "a100-80gb", predicted, 60.0), ("cloud-k8s", "a100-80gb", 0.0, 0.0)])
    assert report is not None
    return ReplayEstimateRun(trace="gpu.csv", half="second", time_compress=5.0, seed=11, policy="default",
                             jobs=jobs, report=report)


def test_a_recorded_run_keeps_the_error_overall_and_per_destination(db):
    [row] = record_replay_estimates(runs=[_run(660.0)])
    assert (row.count, row.mean_abs_s, row.p90_abs_s, row.mean_signed_s) == (2, 300.0, 600.0, 300.0)
    per = {(d.cluster, d.pool): d.summary.mean_abs_s for d in row.report().by_destination}
    assert per == {("onprem-slurm", "a100-80gb"): 600.0, ("cloud-k8s", "a100-80gb"): 0.0}
    audit = AuditRecord.objects.get(action="replay.estimates_recorded")
    assert "default on gpu.csv (second, x5, seed 11)" in audit.message


def test_the_same_run_made_again_replaces_its_figures_and_a_shorter_run_is_another(db):
    record_replay_estimates(runs=[_run(660.0)])
    record_replay_estimates(runs=[_run(60.0)])
    record_replay_estimates(runs=[_run(60.0, jobs=10)])
    full = ReplayEstimate.objects.get(jobs=40)
    assert full.mean_abs_s == 0.0
    assert ReplayEstimate.objects.count() == 2


def test_nothing_to_record_writes_nothing(db):
    assert record_replay_estimates(runs=[]) == []
    assert not AuditRecord.objects.filter(action="replay.estimates_recorded").exists()
