"""Differential check on a random fleet (the benchmark's generator, scaled down):
every ranked candidate really fits, and every topology exclusion really does not."""
from __future__ import annotations

import importlib.util
import random
from collections import Counter
from pathlib import Path

from broker.placement import PreparedFleet, load_policy_file, pack_gang
from broker.placement.engine import place_prepared

ROOT = Path(__file__).resolve().parents[3]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_placement",
                                                  ROOT / "bench" / "bench_placement.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _check_candidate(snap, cand, spec):
    pool = next(p for p in snap.pools if p.name == cand.pool)
    free = {n.name: n.gpus_free for n in pool.nodes}
    domains = {n.name: n.interconnect_domain for n in pool.nodes}
    assert len(cand.assignment) == spec.workers
    for node, count in Counter(cand.assignment).items():
        assert count * spec.gpus_per_worker <= free[node]
    if spec.same_interconnect and spec.workers > 1:
        assert len({domains[n] for n in cand.assignment}) == 1


def test_random_fleet_decisions_are_sound():
    bench = _bench()
    rng = random.Random(11)
    snaps, facts = bench.make_fleet(rng, 12, 24)
    policy = load_policy_file(str(ROOT / "broker" / "policy" / "default.yaml"))
    fleet = PreparedFleet(snaps, facts, policy)
    by_name = {s.cluster: s for s in snaps}
    placed = 0
    for spec, tenant in bench.make_workloads(rng, 400):
        result = place_prepared(fleet, spec, tenant=tenant, quota_remaining=10_000, now=bench.NOW)
        eligible = {(e.cluster, e.prepared.pool.name)
                    for e in fleet.static_for(spec, tenant).entries}
        for cand in result.ranked:
            _check_candidate(by_name[cand.cluster], cand, spec)
        assert {c.cluster for c in result.ranked}.isdisjoint(result.excluded)
        assert {c.cluster for c in result.ranked} | set(result.excluded) == set(by_name)
        for cluster, exc in result.excluded.items():
            if exc.rule != "topology":
                continue
            for pool in by_name[cluster].pools:
                if (cluster, pool.name) in eligible and not spec.same_interconnect:
                    free = [n.gpus_free for n in pool.nodes]
                    assert pack_gang(free, spec.gpus_per_worker, spec.workers) is None
        scores = [c.score for c in result.ranked]
        assert scores == sorted(scores)
        placed += bool(result.ranked)
    assert placed > 100


def test_booking_pass_never_overbooks():
    bench = _bench()
    rng = random.Random(5)
    snaps, facts = bench.make_fleet(rng, 6, 16)
    policy = load_policy_file(str(ROOT / "broker" / "policy" / "default.yaml"))
    fleet = PreparedFleet(snaps, facts, policy)
    booked: Counter[tuple[str, str]] = Counter()
    for spec, tenant in bench.make_workloads(rng, 600):
        best = place_prepared(fleet, spec, tenant=tenant, quota_remaining=10_000, now=bench.NOW).best
        if best is not None:
            fleet.take(best)
            for node in best.assignment:
                booked[(best.cluster, node)] += best.gpus_per_worker
    free = {(s.cluster, n.name): n.gpus_free for s in snaps for p in s.pools for n in p.nodes}
    assert booked and all(gpus <= free[key] for key, gpus in booked.items())
