"""Replay tenants with a monthly cloud budget: bursting keeps within it, and the report says
each tenant-month's spend against it."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from broker.fleet_file import parse_fleet
from broker.replay.budgets import budget_figures, tenant_month_spend
from broker.replay.jobs import ReplayJob
from broker.replay.runner import ReplayConfig, replay_run
from broker.replay.tracker import Outcome

from .conftest import FRAGMENTED_FLEET

ORIGIN = datetime(2023, 1, 1, tzinfo=timezone.utc)


def _job(key: str, at: float, gpus: int = 4, run_s: float = 3600.0, tenant: str = "physics") -> ReplayJob:
    return ReplayJob(key=key, submit_s=at, tenant=tenant, gpu_class="a100-80gb", min_memory_gb=80,
                     gpus_per_worker=gpus, workers=1, duration_s=run_s)


def test_a_job_across_a_month_end_is_billed_to_both_months():
    fleet = parse_fleet(FRAGMENTED_FLEET, source="f")
    jan_31_23h = (datetime(2023, 1, 31, 23, tzinfo=timezone.utc) - ORIGIN).total_seconds()
    outcome = Outcome(_job("a", jan_31_23h, gpus=2, run_s=2 * 3600), start_s=jan_31_23h, cluster="roomy")
    spend = tenant_month_spend([outcome], fleet, ORIGIN)
    assert spend == {("physics", "2023-01"): pytest.approx(2 * 1 * 3.6), ("physics", "2023-02"): pytest.approx(2 * 3.6)}
    on_prem = Outcome(_job("b", 0), start_s=0, cluster="frag")
    assert tenant_month_spend([on_prem], fleet, ORIGIN) == {}


def test_the_figures_count_the_tenant_months_over_the_budget():
    spend = {("a", "2023-01"): 40.0, ("a", "2023-02"): 60.0, ("b", "2023-01"): 10.0}
    assert budget_figures(spend, 50.0) == {
        "max tenant-month cloud spend": 60, "cloud budget per tenant-month": 50, "tenant-months over budget": 1}
    assert budget_figures(spend, None) == {"max tenant-month cloud spend": 60}


def test_bursting_keeps_each_tenant_within_its_monthly_cloud_budget(transactional_db):
    fleet = parse_fleet(FRAGMENTED_FLEET, source="f")
    # on-prem (16 GPUs) full after four jobs; each later one would burst at 4 x 1 h x 3.6 = 14.4
    jobs = [_job(f"j{i:02d}", 60.0 * i) for i in range(16)]
    free = replay_run("default", jobs, fleet, seed=1)
    capped = replay_run("default", jobs, fleet, seed=1, cloud_budget=30.0)
    assert free.extra["max tenant-month cloud spend"] > 30
    assert capped.extra["tenant-months over budget"] == 0
    assert 0 < capped.extra["max tenant-month cloud spend"] <= 30
    assert all(o.start_s is not None for o in capped.outcomes.values())  # the rest waited for on-prem
    waited = sum(o.start_s - o.job.submit_s for o in capped.outcomes.values())
    assert waited > sum(o.start_s - o.job.submit_s for o in free.outcomes.values())


def test_a_negative_budget_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="cloud_budget"):
        ReplayConfig(trace=tmp_path / "t.csv", fleet=tmp_path / "f.yaml", cloud_budget=-1.0)
