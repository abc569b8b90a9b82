"""The CI-sized sample of the fault harness: every named crash point injected, every
invariant count zero.  The long run (1,000+ faults) is `manage.py fault_harness`; its
table is in docs/reliability.md."""
from __future__ import annotations

import pytest

from broker.faults.harness import HarnessConfig, run_harness
from broker.faults.invariants import CHECKS, INVARIANTS
from broker.faults.points import CRASH_POINTS

pytestmark = pytest.mark.django_db(transaction=True)


def test_sample_run_injects_faults_at_every_point_and_breaks_no_invariant():
    report = run_harness(HarnessConfig(workloads=60, faults=120, seed=20240917, cancel_share=0.35))
    print(report.table())
    assert report.faults >= 120, report.table()
    missing = [p.name for p in CRASH_POINTS if report.faults_by_point.get(p.name, 0) == 0]
    assert not missing, f"never injected: {missing}\n{report.table()}"
    assert set(report.counts) == {k for k, _ in INVARIANTS + CHECKS}
    assert all(v == 0 for v in report.counts.values()), report.table()
    assert report.workloads >= 60 and report.states.get("completed", 0) > 0
    assert report.ok


def test_the_same_seed_injects_the_same_faults():
    from django.core.management import call_command

    first = run_harness(HarnessConfig(workloads=6, faults=8, seed=5))
    call_command("flush", interactive=False, verbosity=0)
    second = run_harness(HarnessConfig(workloads=6, faults=8, seed=5))
    assert first.faults_by_point == second.faults_by_point
    assert first.states == second.states
