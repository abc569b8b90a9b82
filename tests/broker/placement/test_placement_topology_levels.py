"""A gang that requires or prefers a topology level (``topology_level``): placement packs a
required level exactly, with the rule and the numbers where none holds it, and ranks the
pools that keep a preferred level first."""
from __future__ import annotations

RACK = "cloud.example.com/rack"


def _racks(*racks: str) -> list[tuple[tuple[str, str], ...]]:
    return [((RACK, r),) for r in racks]


def test_a_gang_that_fits_the_free_gpus_but_no_single_rack_does_not_go_there(kit):
    # two racks with one 4-GPU node free each: 8 GPUs free, no rack holds 2 x 4 now
    pool = kit.pool("a", [4, 4, 0], total=4, levels=_racks("r1", "r2", "r1"))
    result = kit.place(kit.fleet([kit.snap("a", pool)]), kit.spec(gpus_per_worker=4, workers=2,
                                                                  topology_level="rack", topology_mode="required"))
    assert result.ranked == []
    exc = result.excluded["a"]
    assert exc.rule == "topology"
    assert exc.message == (f"pool gpu: 1 of 2 workers of 4 GPUs fit in one rack ({RACK}) now "
                           "(8 GPUs free, but split across nodes)")


def test_a_required_rack_goes_to_the_cluster_where_one_rack_holds_the_gang(kit):
    spread = kit.pool("a", [4, 4, 0], total=4, levels=_racks("r1", "r2", "r1"))
    packed = kit.pool("b", [4, 4, 0], total=4, levels=_racks("r1", "r1", "r2"))
    fleet = kit.fleet([kit.snap("a", spread), kit.snap("b", packed)],
                      [kit.facts("a", image_pull_s=1.0), kit.facts("b", image_pull_s=600.0)])
    result = kit.place(fleet, kit.spec(gpus_per_worker=4, workers=2, topology_level="rack"))
    assert [c.cluster for c in result.ranked] == ["b"]
    assert sorted(result.best.assignment) == ["b-gpu-n0", "b-gpu-n1"]
    assert "1 of 2 workers of 4 GPUs fit in one rack" in result.excluded["a"].message


def test_the_gang_is_packed_into_the_tightest_rack_that_holds_it(kit):
    pool = kit.pool("a", [8, 8, 4, 4], levels=_racks("big", "big", "small", "small"))
    result = kit.place(kit.fleet([kit.snap("a", pool)]), kit.spec(gpus_per_worker=4, workers=2,
                                                                  topology_level="rack"))
    assert sorted(result.best.assignment) == ["a-gpu-n2", "a-gpu-n3"]


def test_a_cluster_that_describes_no_such_level_never_takes_the_gang(kit):
    pool = kit.pool("a", [8, 8])  # no levels reported
    result = kit.place(kit.fleet([kit.snap("a", pool)]), kit.spec(gpus_per_worker=4, workers=2,
                                                                  topology_level="rack"))
    assert result.ranked == []
    assert result.excluded["a"].rule == "never_fits"
    assert result.excluded["a"].message == "pool gpu: the cluster describes no rack level (its levels: host)"


def test_host_is_every_clusters_level_and_puts_the_gang_on_one_node(kit):
    pool = kit.pool("a", [4, 4, 8])
    result = kit.place(kit.fleet([kit.snap("a", pool)]), kit.spec(gpus_per_worker=4, workers=2,
                                                                  topology_level="host"))
    assert result.best.assignment == ("a-gpu-n2", "a-gpu-n2")


def test_a_cluster_may_be_asked_for_by_its_own_level_name(kit):
    levels = [(("tier 2", "spine"), ("tier 1", "r1")), (("tier 2", "spine"), ("tier 1", "r2")),
              (("tier 2", "spine"), ("tier 1", "r1"))]
    pool = kit.pool("a", [4, 4, 0], total=4, levels=levels)
    fleet = kit.fleet([kit.snap("a", pool)])
    by_tier2 = kit.place(fleet, kit.spec(gpus_per_worker=4, workers=2, topology_level="tier 2"))
    assert sorted(by_tier2.best.assignment) == ["a-gpu-n0", "a-gpu-n1"]
    by_rack = kit.place(fleet, kit.spec(gpus_per_worker=4, workers=2, topology_level="rack"))
    assert "fit in one rack (tier 1) now" in by_rack.excluded["a"].message


def test_a_rack_that_holds_the_gang_only_when_idle_says_wait_not_never(kit):
    pool = kit.pool("a", [4, 0], total=4, levels=_racks("r1", "r1"))
    result = kit.place(kit.fleet([kit.snap("a", pool)]), kit.spec(gpus_per_worker=4, workers=2,
                                                                  topology_level="rack"))
    assert result.excluded["a"].rule == "topology"
    assert result.reason == "capacity"


def test_a_rack_too_small_even_when_idle_never_fits(kit):
    pool = kit.pool("a", [4, 4], total=4, levels=_racks("r1", "r2"))
    result = kit.place(kit.fleet([kit.snap("a", pool)]), kit.spec(gpus_per_worker=4, workers=3,
                                                                  topology_level="rack"))
    assert result.excluded["a"].rule == "never_fits"
    assert "can never hold 3 x 4 GPUs in one rack" in result.excluded["a"].message


def test_a_preferred_rack_ranks_the_cluster_that_keeps_it_first_and_packs_within_it(kit):
    spread = kit.pool("a", [4, 4], total=4, levels=_racks("r1", "r2"))
    packed = kit.pool("b", [4, 4, 4], total=4, levels=_racks("r1", "r2", "r2"))
    # a is the better score (it pulls faster), but only b keeps the gang in one rack
    fleet = kit.fleet([kit.snap("a", spread), kit.snap("b", packed)],
                      [kit.facts("a", image_pull_s=1.0), kit.facts("b", image_pull_s=600.0)])
    result = kit.place(fleet, kit.spec(gpus_per_worker=4, workers=2, topology_level="rack",
                                       topology_mode="preferred"))
    assert [c.cluster for c in result.ranked] == ["b", "a"]
    assert sorted(result.best.assignment) == ["b-gpu-n1", "b-gpu-n2"]
    assert result.best.detail["topology"] == f"in one rack ({RACK})"
    assert result.ranked[1].detail["topology"] == f"not in one rack ({RACK}): no domain holds the gang now (score +4)"
    # the heaviest weight of the preset (on-prem-first: location, 4) is what the preference weighs
    assert result.ranked[1].score - result.best.score > 3


def test_a_preferred_level_no_cluster_keeps_still_places_the_gang(kit):
    pool = kit.pool("a", [4, 4], total=4)
    result = kit.place(kit.fleet([kit.snap("a", pool)]), kit.spec(gpus_per_worker=4, workers=2,
                                                                  topology_level="rack",
                                                                  topology_mode="preferred"))
    assert sorted(result.best.assignment) == ["a-gpu-n0", "a-gpu-n1"]
    assert result.best.detail["topology"] == "not in one rack: no such level here (score +4)"


def test_a_preference_weighs_one_term_so_a_cluster_better_on_several_still_wins(kit):
    keeps = kit.pool("cloud", [8], levels=_racks("r1"))
    spreads = kit.pool("onprem", [4, 4], levels=_racks("r1", "r2"))
    # the cloud keeps the rack, but the policy's location term (4) and its price count against it
    fleet = kit.fleet([kit.snap("cloud", keeps), kit.snap("onprem", spreads)],
                      [kit.facts("cloud", location="cloud", price_per_gpu_hour=4.0),
                       kit.facts("onprem", price_per_gpu_hour=1.0)])
    result = kit.place(fleet, kit.spec(gpus_per_worker=4, workers=2, topology_level="rack",
                                       topology_mode="preferred"))
    assert [c.cluster for c in result.ranked] == ["onprem", "cloud"]
    assert result.best.detail["topology"].startswith("not in one rack")


def test_placements_in_one_pass_keep_the_level_indexes_exact(kit):
    pool = kit.pool("a", [4, 4, 4, 4], total=4, levels=_racks("r1", "r1", "r2", "r2"))
    fleet = kit.fleet([kit.snap("a", pool)])
    spec = kit.spec(gpus_per_worker=4, workers=2, topology_level="rack")
    first = kit.place(fleet, spec)
    entry = fleet.pool("a", "gpu")
    entry.index.take([entry.node_index[n] for n in first.best.assignment], 4)
    second = kit.place(fleet, spec)
    entry.index.take([entry.node_index[n] for n in second.best.assignment], 4)
    taken = {n[-2:] for n in first.best.assignment} | {n[-2:] for n in second.best.assignment}
    assert taken == {"n0", "n1", "n2", "n3"}
    assert kit.place(fleet, spec).ranked == []
