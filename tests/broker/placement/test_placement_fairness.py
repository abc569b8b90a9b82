"""Starvation guards: aging, minimum share, and holding a pool for a big gang."""
from __future__ import annotations

from broker.placement import Pending, hold_target, order_pending, priority, should_hold_for_gang
from broker.placement.fairness import aging_boost
from broker.placement.policy import Aging, TenantPolicy


def test_aging_boost_grows_faster_for_big_gangs_and_is_capped(kit):
    aging = Aging(boost_per_hour=1.0, max_boost=10.0, big_gang_gpus=16)
    small = kit.spec(gpus_per_worker=1)
    big = kit.spec(gpus_per_worker=8, workers=2)
    assert aging_boost(small, 2 * 3600, aging) == 2.0
    assert aging_boost(big, 2 * 3600, aging) == 4.0
    assert aging_boost(big, 100 * 3600, aging) == 10.0


def test_min_share_bonus(kit):
    policy = kit.policy(tenants={"*": TenantPolicy("*"),
                                 "lab": TenantPolicy("lab", min_share=0.2)})
    spec = kit.spec()
    under = priority(spec, "lab", 0, share_used=0.1, policy=policy)
    over = priority(spec, "lab", 0, share_used=0.3, policy=policy)
    assert under == over + policy.aging.min_share_bonus
    assert priority(spec, "other", 0, share_used=0.0, policy=policy) == over


def test_order_pending_is_fair_and_deterministic(kit):
    policy = kit.policy(tenants={"*": TenantPolicy("*"),
                                 "starved": TenantPolicy("starved", min_share=0.5)})
    items = [Pending("b", kit.spec(), "x"), Pending("a", kit.spec(), "x"),
             Pending("old", kit.spec(), "x", age_s=3 * 3600),
             Pending("urgent", kit.spec(priority="high"), "x"),
             Pending("fair", kit.spec(), "starved")]
    order = [p.key for p in order_pending(items, policy, {"starved": 0.1})]
    assert order == ["old", "fair", "urgent", "a", "b"]
    assert order == [p.key for p in order_pending(reversed(items), policy,
                                                   {"starved": 0.1})]


def test_should_hold_for_gang(kit):
    aging = Aging(big_gang_gpus=16, hold_after_s=3600)
    big = kit.spec(gpus_per_worker=8, workers=2)
    assert not should_hold_for_gang(big, 60, aging)
    assert should_hold_for_gang(big, 3600, aging)
    assert not should_hold_for_gang(kit.spec(gpus_per_worker=8), 99999, aging)


def test_holding_a_pool_drains_it_for_the_gang(kit):
    snaps = [kit.snap("a", kit.pool("a", [2, 2])),
             kit.snap("b", kit.pool("b", [4, 6])),   # closest to fitting 2 x 8
             kit.snap("tiny", kit.pool("tiny", [8], total=8))]  # only one node: never fits
    fleet = kit.fleet(snaps)
    gang = kit.spec(gpus_per_worker=8, workers=2)
    assert kit.place(fleet, gang).reason == "capacity"
    target = hold_target(fleet, gang, "t", kit.now)
    assert target == ("b", "gpu")
    fleet.hold(*target, holder="wl-gang")
    small = kit.place(fleet, kit.spec(gpus_per_worker=2), limit=None)
    assert "b" not in {c.cluster for c in small.ranked}
    assert "held for waiting gang wl-gang" in small.excluded["b"].message
    # the gang itself may still use its held pool
    mine = kit.place(fleet, kit.spec(gpus_per_worker=2), holder="wl-gang")
    assert "b" in {c.cluster for c in mine.ranked}
    fleet.release("wl-gang")
    assert "b" in {c.cluster for c in kit.place(fleet, kit.spec(gpus_per_worker=2)).ranked}


def test_held_pool_message(kit):
    fleet = kit.fleet([kit.snap("a", kit.pool("a", [8]))])
    fleet.hold("a", "gpu", "wl-1")
    result = kit.place(fleet, kit.spec())
    assert result.excluded["a"].rule == "topology"
    assert "held for waiting gang wl-1" in result.excluded["a"].message
    assert result.reason == "capacity"
