"""The benchmark's generator and pipeline, at a size a test can afford."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from django.db.models import Sum

from accounting.models import UsageEntry

pytestmark = pytest.mark.django_db


def _bench():
    path = Path(__file__).resolve().parents[2] / "bench" / "bench_sacct_ingest.py"
    spec = importlib.util.spec_from_file_location("bench_sacct_ingest", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_pipeline_small():
    bench = _bench()
    cluster = bench.fixtures()
    seconds, report, expected = bench.run_once(600, cluster)
    assert report.created == expected.jobs == 588
    assert UsageEntry.objects.aggregate(s=Sum("gpu_seconds"))["s"] == expected.gpu_seconds
    assert sum(report.unmatched_accounts.values()) == 6
