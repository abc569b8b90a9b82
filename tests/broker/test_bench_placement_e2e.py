"""The end-to-end placement benchmark's own steps, at a size a test can afford: its fleet,
tenants and submitted workloads, then its passes and dispatches run in-process until
every workload is at its simulated cluster (no timing asserted)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from broker.models import AuditRecord, Reservation, Workload

pytestmark = pytest.mark.django_db(transaction=True)  # dispatch is queued after each commit


def _bench():
    path = Path(__file__).resolve().parents[2] / "bench" / "bench_placement_e2e.py"
    spec = importlib.util.spec_from_file_location("bench_placement_e2e", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_bench_places_reserves_and_dispatches_every_submitted_workload(tmp_path):
    bench = _bench()
    seeded = bench.seed(count=30, clusters=2, nodes=6, fleet_path=tmp_path / "fleet.yaml")
    assert Workload.objects.filter(state="submitted").count() == 30  # nothing placed on submission
    bench.sync_inventory()

    bench.run_in_process(expected=30, timeout_s=120)

    states = bench.states()
    assert set(states) <= {"queued", "running"} and sum(states.values()) == 30, states
    assert Reservation.objects.filter(state="confirmed").count() == 30
    decided = AuditRecord.objects.filter(action="placement.decided").exclude(destination_job_id="")
    assert sorted(decided.values_list("workload_id", flat=True)) == sorted(seeded.workload_ids)


def test_the_bench_counts_the_same_queries_per_pass_with_twice_the_clusters(tmp_path):
    bench = _bench()
    counts = []
    for clusters in (2, 4):
        bench.reset_database()
        bench.seed(count=12, clusters=clusters, nodes=4, fleet_path=tmp_path / f"fleet{clusters}.yaml")
        bench.sync_inventory()
        queries = bench.pass_queries()
        assert queries.placed == 12 and queries.chunks == 1
        counts.append((queries.total, queries.selects, queries.dispatch))
    assert counts[0] == counts[1]


def test_the_dispatch_of_a_chunk_costs_the_same_queries_for_twice_the_workloads(tmp_path):
    bench = _bench()
    counts = []
    for count in (12, 24):
        bench.reset_database()
        bench.seed(count=count, clusters=2, nodes=4, fleet_path=tmp_path / f"fleet{count}.yaml")
        bench.sync_inventory()
        queries = bench.pass_queries()
        assert queries.placed == count and queries.chunks == 1
        counts.append(queries.dispatch)
    assert counts[0] == counts[1]
    assert Workload.objects.filter(state="queued").count() == 24
