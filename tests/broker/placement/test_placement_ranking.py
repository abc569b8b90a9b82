"""Ranking terms (one test each), score breakdowns, presets, ties and aging."""
from __future__ import annotations

import dataclasses

import pytest

from broker.backends.base import QueueStats
from broker.placement import TERMS, place, terms
from broker.placement.policy import QueueModel


def test_queue_wait_term(kit):
    model = QueueModel(assumed_job_hours=1.0, max_wait_s=86400)
    assert terms.queue_wait_s(QueueStats(), model) == 0.0
    # 10 pending GPU-hours ahead, 5 GPU-hours/hour throughput: 2 hours
    assert terms.queue_wait_s(QueueStats(3, 10, 5.0), model) == pytest.approx(7200)
    assert terms.queue_wait_s(QueueStats(3, 10, 0.0), model) == 86400  # unknown: worst
    assert terms.queue_wait_s(QueueStats(3, 10_000, 1.0), model) == 86400  # capped


def test_queue_wait_in_breakdown(kit):
    snap = kit.snap("a", kit.pool("a", [8]), queue=QueueStats(2, 8, 4.0))
    best = kit.place(kit.fleet([snap]), kit.spec()).best
    assert best.breakdown["queue_wait_s"] == pytest.approx(7200)


def test_startup_term(kit):
    facts = kit.facts("a", image_pull_s=40, provisioning_s=120,
                      bandwidth_gbps={"s3://x": 10.0})
    # 100 GB at 10 Gbps = 80 s of staging
    assert terms.startup_s(facts, "s3://x", 100) == pytest.approx(240)
    local = dataclasses.replace(facts, data_locations=("s3://x",))
    assert terms.startup_s(local, "s3://x", 100) == pytest.approx(160)
    assert terms.startup_s(facts, "", 0) == pytest.approx(160)


def test_startup_in_breakdown_uses_default_bandwidth(kit):
    fleet = kit.fleet([kit.snap("a", kit.pool("a", [8]))],
                      [kit.facts("a", image_pull_s=10, default_bandwidth_gbps=2.0)])
    best = kit.place(fleet, kit.spec(data_location="s3://y", data_size_gb=50)).best
    assert best.breakdown["startup_s"] == pytest.approx(10 + 50 * 8 / 2.0)


def test_gpu_cost_term(kit):
    fleet = kit.fleet([kit.snap("a", kit.pool("a", [8]))],
                      [kit.facts("a", price_per_gpu_hour=2.5)])
    spec = kit.spec(gpus_per_worker=4, workers=1, time_limit_minutes=120)
    assert kit.place(fleet, spec).best.breakdown["gpu_cost"] == pytest.approx(2.5 * 4 * 2)
    # a learnt runtime replaces the time limit (but never exceeds it)
    learnt = kit.place(fleet, spec, runtime_hours=0.5).best.breakdown["gpu_cost"]
    assert learnt == pytest.approx(2.5 * 4 * 0.5)
    assert terms.runtime_hours(spec, 10.0) == 2.0


def test_gpu_cost_pool_price_override(kit):
    facts = kit.facts("a", price_per_gpu_hour=1.0, pool_prices={"gpu": 3.0})
    fleet = kit.fleet([kit.snap("a", kit.pool("a", [8]))], [facts])
    assert kit.place(fleet, kit.spec()).best.breakdown["gpu_cost"] == pytest.approx(3.0)


def test_transfer_cost_is_priced_where_the_data_leaves(kit):
    # the store's owner charges egress to the destination's region; the destination's
    # own egress price (0.5 here) plays no part in pulling data in
    store = kit.facts("store", egress_per_gb=0.09, data_locations=("s3://x",))
    puller = kit.facts("a", egress_per_gb=0.5)
    assert terms.transfer_cost(puller, "s3://x", 200, source=store) == pytest.approx(18.0)
    assert terms.transfer_cost(store, "s3://x", 200, source=store) == 0.0
    fleet = kit.fleet([kit.snap("a", kit.pool("a", [8]))], [puller, store])
    best = kit.place(fleet, kit.spec(data_location="s3://x", data_size_gb=200)).best
    assert best.cluster == "a"
    assert best.breakdown["transfer_cost"] == pytest.approx(18.0)
    assert best.breakdown["data_remote"] == 1.0
    assert best.detail["data_from"] == "store" and best.detail["egress_per_gb"] == 0.09


def test_breakdown_has_every_term_and_weighted_sums_to_score(kit):
    snaps = [kit.snap("a", kit.pool("a", [8]), queue=QueueStats(1, 4, 8.0)),
             kit.snap("b", kit.pool("b", [8]))]
    facts = [kit.facts("a", price_per_gpu_hour=1.0), kit.facts("b", location="cloud",
                                                               price_per_gpu_hour=3.0)]
    result = kit.place(kit.fleet(snaps, facts), kit.spec())
    for cand in result.ranked:
        assert set(cand.breakdown) == set(TERMS) == set(cand.weighted)
        assert cand.score == pytest.approx(sum(cand.weighted.values()))
    assert result.to_dict()["ranked"][0]["cluster"] == result.best.cluster


def test_ties_are_broken_by_cluster_name(kit):
    names = ["zeta", "alpha", "mid"]
    snaps = [kit.snap(n, kit.pool(n, [8])) for n in names]
    first = kit.place(kit.fleet(snaps), kit.spec())
    assert [c.cluster for c in first.ranked] == ["alpha", "mid", "zeta"]
    again = kit.place(kit.fleet(list(reversed(snaps))), kit.spec())
    assert [c.to_dict() for c in again.ranked] == [c.to_dict() for c in first.ranked]


def _onprem_and_clouds(kit):
    snaps = [kit.snap(n, kit.pool(n, [8])) for n in ("lab", "cheap", "pricey")]
    facts = [kit.facts("lab", location="onprem", price_per_gpu_hour=2.0),
             kit.facts("cheap", location="cloud", price_per_gpu_hour=1.2),
             kit.facts("pricey", location="cloud", price_per_gpu_hour=4.0)]
    return snaps, facts


@pytest.mark.parametrize("preset, winner", [
    ("on-prem-first", "lab"), ("cost", "cheap"), ("cloud-first", "cheap")])
def test_presets_change_the_winner(kit, preset, winner):
    snaps, facts = _onprem_and_clouds(kit)
    result = place(snaps, facts, kit.spec(), tenant="t", quota_remaining=8, now=kit.now,
                   policy=kit.policy(preset=preset))
    assert result.best.cluster == winner


def test_fastest_preset_prefers_the_short_queue(kit):
    snaps = [kit.snap("busy", kit.pool("busy", [8]), queue=QueueStats(5, 40, 10.0)),
             kit.snap("quiet", kit.pool("quiet", [8]))]
    facts = [kit.facts("busy", price_per_gpu_hour=0.5),
             kit.facts("quiet", price_per_gpu_hour=3.0, location="cloud")]
    fastest = kit.place(kit.fleet(snaps, facts, kit.policy(preset="fastest")), kit.spec())
    assert fastest.best.cluster == "quiet"
    cost = kit.place(kit.fleet(snaps, facts, kit.policy(preset="cost")), kit.spec())
    assert cost.best.cluster == "busy"


def test_data_local_preset_prefers_the_data(kit):
    snaps = [kit.snap("near", kit.pool("near", [8])), kit.snap("far", kit.pool("far", [8]))]
    facts = [kit.facts("near", price_per_gpu_hour=3.0, data_locations=("s3://d",)),
             kit.facts("far", price_per_gpu_hour=1.0, bandwidth_gbps={"s3://d": 100.0})]
    spec = kit.spec(data_location="s3://d", data_size_gb=1)
    local = kit.place(kit.fleet(snaps, facts, kit.policy(preset="data-local")), spec)
    assert local.best.cluster == "near"
    cost = kit.place(kit.fleet(snaps, facts, kit.policy(preset="cost")), spec)
    assert cost.best.cluster == "far"


def test_weight_overrides_apply_on_top_of_the_preset(kit):
    snaps, facts = _onprem_and_clouds(kit)
    policy = kit.policy(preset="on-prem-first", weight_overrides={"location": 0.0})
    result = kit.place(kit.fleet(snaps, facts, policy), kit.spec())
    assert result.best.cluster == "cheap"
    assert result.weights["location"] == 0.0


def test_age_raises_the_queue_wait_weight(kit):
    snaps = [kit.snap("lab", kit.pool("lab", [8]), queue=QueueStats(2, 16, 8.0)),
             kit.snap("cloud", kit.pool("cloud", [8]))]
    facts = [kit.facts("lab"), kit.facts("cloud", location="cloud", price_per_gpu_hour=3.0)]
    fleet = kit.fleet(snaps, facts)
    assert kit.place(fleet, kit.spec()).best.cluster == "lab"
    waited = kit.place(fleet, kit.spec(), age_s=10 * 3600)
    assert waited.weights["queue_wait_s"] > kit.place(fleet, kit.spec()).weights["queue_wait_s"]
    assert waited.best.cluster == "cloud"


def test_limit_keeps_the_best_n(kit):
    snaps = [kit.snap(f"c{i}", kit.pool(f"c{i}", [8])) for i in range(5)]
    result = kit.place(kit.fleet(snaps), kit.spec(), limit=2)
    assert [c.cluster for c in result.ranked] == ["c0", "c1"]


def test_policy_version_is_recorded(kit):
    policy = kit.policy(version="abc123def456")
    result = kit.place(kit.fleet([kit.snap("a", kit.pool("a", [8]))], policy=policy),
                       kit.spec())
    assert result.policy_version == "abc123def456"
    assert result.to_dict()["policy_version"] == "abc123def456"
