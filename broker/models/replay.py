"""What trace replays measured, kept for the portal: the broker's queue-wait estimator
against the waits its jobs then had (the replay itself runs in a throwaway database)."""

from __future__ import annotations

from django.db import models

from broker.placement.wait_estimator import ErrorSummary, EstimatorReport, destination_errors


class ReplayEstimate(models.Model):
    """One broker preset's run over one trace window: how far its wait predictions were
    from the waits that followed, overall and per destination (cluster x pool).  A rerun
    of the same window, seed, policy and number of jobs replaces the figures."""

    trace = models.CharField(max_length=200, help_text="the trace file's name")
    half = models.CharField(max_length=10, help_text="first (tuning), second (held out) or all")
    time_compress = models.FloatField()
    seed = models.IntegerField()
    policy = models.CharField(max_length=60)
    jobs = models.PositiveIntegerField(help_text="jobs replayed")
    count = models.PositiveIntegerField(help_text="started jobs with a prediction")
    mean_abs_s = models.FloatField()
    p50_abs_s = models.FloatField()
    p90_abs_s = models.FloatField()
    mean_signed_s = models.FloatField(help_text="> 0: predicted longer waits than seen")
    by_destination = models.JSONField(default=list, blank=True)
    recorded_at = models.DateTimeField()

    class Meta:
        ordering = ["-recorded_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["trace", "half", "time_compress", "seed", "policy", "jobs"], name="one_estimate_per_replay_run"
            )
        ]

    def __str__(self) -> str:
        return f"{self.policy} on {self.trace} ({self.half}, x{self.time_compress:g}, seed {self.seed})"

    def report(self) -> EstimatorReport:
        """The stored figures as the estimator's report (per destination as stored)."""
        overall = ErrorSummary(
            count=self.count,
            mean_abs_s=self.mean_abs_s,
            p50_abs_s=self.p50_abs_s,
            p90_abs_s=self.p90_abs_s,
            mean_signed_s=self.mean_signed_s,
        )
        return EstimatorReport(overall=overall, by_destination=destination_errors(self.by_destination or []))


class SimulatorCalibration(models.Model):
    """One ``manage.py calibrate`` run: a job list played on a real control plane and on the
    simulator built from its inventory; the medians over the run's repetitions (each
    repetition's figures in ``repetitions``)."""

    cluster = models.CharField(max_length=100)
    control_plane = models.CharField(max_length=100, help_text="as the cluster words its version: slurm 22.05.8")
    partition = models.CharField(max_length=100, blank=True)
    job_list = models.CharField(max_length=200)
    commit = models.CharField(max_length=40, blank=True)
    scheduler = models.CharField(max_length=200, help_text="the scheduling cycle as configured")
    cycle_s = models.FloatField(help_text="starts within this of each other count as tied")
    jobs = models.PositiveIntegerField()
    pair_order = models.FloatField(help_text="share of job pairs started in the same order")
    median_abs_error_s = models.FloatField()
    p95_abs_error_s = models.FloatField()
    reason_agreement = models.FloatField(help_text="share of sampled instants with the same queue reason")
    repetitions = models.JSONField(default=list, blank=True)
    recorded_at = models.DateTimeField()

    class Meta:
        ordering = ["-recorded_at", "-id"]

    def __str__(self) -> str:
        return f"{self.control_plane} on {self.cluster}: {self.pair_order:.0%} of pairs in order"
