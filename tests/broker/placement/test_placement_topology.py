"""The whole gang must fit in one pool of one cluster, each worker on one node."""
from __future__ import annotations

from collections import Counter


def _free_after(pool, assignment, gpus_per_worker):
    used = Counter(assignment)
    return {n.name: n.gpus_free - used[n.name] * gpus_per_worker for n in pool.nodes}


def test_fragmented_capacity_does_not_fit_big_workers(kit):
    pool = kit.pool("a", [2, 2, 2, 2], total=4)  # 8 free GPUs, but 2 per node
    fleet = kit.fleet([kit.snap("a", pool)])
    result = kit.place(fleet, kit.spec(gpus_per_worker=4, workers=2))
    assert result.ranked == []
    assert result.excluded["a"].rule == "topology"
    assert "0 of 2 workers" in result.excluded["a"].message
    assert "split across nodes" in result.excluded["a"].message
    assert result.reason == "capacity"  # not policy: it could fit once jobs end


def test_fragmented_capacity_fits_small_workers(kit):
    pool = kit.pool("a", [2, 2, 2, 2], total=4)
    result = kit.place(kit.fleet([kit.snap("a", pool)]), kit.spec(gpus_per_worker=2, workers=4))
    best = result.best
    assert best is not None and len(best.assignment) == 4
    assert sorted(best.assignment) == sorted(n.name for n in pool.nodes)


def test_free_gpus_are_never_summed_across_clusters(kit):
    snaps = [kit.snap("a", kit.pool("a", [4])), kit.snap("b", kit.pool("b", [4]))]
    result = kit.place(kit.fleet(snaps), kit.spec(gpus_per_worker=8))
    assert result.ranked == [] and result.reason == "capacity"


def test_free_gpus_are_never_summed_across_pools(kit):
    snap = kit.snap("a", kit.pool("a", [4], name="p1"), kit.pool("a", [4], name="p2"))
    result = kit.place(kit.fleet([snap]), kit.spec(gpus_per_worker=4, workers=2))
    assert result.ranked == []


def test_several_workers_may_share_a_node(kit):
    pool = kit.pool("a", [8, 1])
    result = kit.place(kit.fleet([kit.snap("a", pool)]), kit.spec(gpus_per_worker=2, workers=4))
    assert result.best.assignment == ("a-gpu-n0",) * 4


def test_assignment_never_overbooks_a_node(kit):
    pool = kit.pool("a", [3, 5, 8, 2, 6])
    fleet = kit.fleet([kit.snap("a", pool)])
    result = kit.place(fleet, kit.spec(gpus_per_worker=2, workers=9))
    best = result.best
    assert len(best.assignment) == 9
    assert min(_free_after(pool, best.assignment, 2).values()) >= 0


def test_best_fit_keeps_big_holes_open(kit):
    pool = kit.pool("a", [8, 2, 4])
    result = kit.place(kit.fleet([kit.snap("a", pool)]), kit.spec(gpus_per_worker=2))
    assert result.best.assignment == ("a-gpu-n1",)


def test_same_interconnect_needs_one_domain(kit):
    pool = kit.pool("a", [4, 4, 4], domains=["ib0", "ib1", "ib1"])
    fleet = kit.fleet([kit.snap("a", pool)])
    three = kit.place(fleet, kit.spec(gpus_per_worker=4, workers=3, same_interconnect=True))
    assert three.excluded["a"].rule == "topology"
    assert "one interconnect domain" in three.excluded["a"].message
    two = kit.place(fleet, kit.spec(gpus_per_worker=4, workers=2, same_interconnect=True))
    assert sorted(two.best.assignment) == ["a-gpu-n1", "a-gpu-n2"]
    loose = kit.place(fleet, kit.spec(gpus_per_worker=4, workers=3))
    assert len(loose.best.assignment) == 3


def test_same_interconnect_unknown_domain_is_its_own(kit):
    pool = kit.pool("a", [4, 4])  # no domains reported: cannot promise a shared fabric
    fleet = kit.fleet([kit.snap("a", pool)])
    spec = kit.spec(gpus_per_worker=4, workers=2, same_interconnect=True)
    assert kit.place(fleet, spec).excluded["a"].rule == "topology"
    one_node = kit.spec(gpus_per_worker=2, workers=2, same_interconnect=True)
    assert kit.place(fleet, one_node).best.assignment == ("a-gpu-n0", "a-gpu-n0")


def test_gang_that_can_never_fit_says_so_and_is_not_a_capacity_wait(kit):
    pool = kit.pool("a", [4, 4], total=4)
    result = kit.place(kit.fleet([kit.snap("a", pool)]), kit.spec(gpus_per_worker=8))
    assert "can never hold" in result.excluded["a"].message
    assert result.excluded["a"].rule == "never_fits"
    assert result.reason == "policy"  # waiting will not help: the service rejects it


def test_gang_too_big_for_an_autoscaling_cluster_waits_for_it_to_grow(kit):
    pool = kit.pool("a", [4, 4], total=4)
    fleet = kit.fleet([kit.snap("a", pool)], policy=kit.policy(autoscaling=("a",)))
    result = kit.place(fleet, kit.spec(gpus_per_worker=8))
    assert result.excluded["a"].rule == "topology" and "autoscales" in result.excluded["a"].message
    assert result.reason == "capacity"


def test_gang_that_fits_only_when_down_nodes_return_is_not_never(kit):
    pool = kit.pool("a", [0, 0], total=8)
    nodes = tuple(n.__class__(**{**n.__dict__, "healthy": False}) for n in pool.nodes)
    pool = pool.__class__(pool.name, pool.gpu_model, pool.gpu_memory_gb, pool.partitioning,
                          pool.owner, nodes)
    result = kit.place(kit.fleet([kit.snap("a", pool)]), kit.spec(gpus_per_worker=8, workers=2))
    assert result.excluded["a"].rule == "topology" and result.reason == "capacity"


def test_capacity_beats_policy_in_the_reason(kit):
    snaps = [kit.snap("full", kit.pool("full", [0, 0])),
             kit.snap("l4", kit.pool("l4", [8], model="NVIDIA L4", memory=24))]
    result = kit.place(kit.fleet(snaps), kit.spec())
    assert result.excluded["l4"].rule == "gpu_compat"
    assert result.excluded["full"].rule == "topology"
    assert result.reason == "capacity"


def test_one_fitting_pool_keeps_the_cluster(kit):
    snap = kit.snap("a", kit.pool("a", [1], name="small"), kit.pool("a", [8], name="big"))
    result = kit.place(kit.fleet([snap]), kit.spec(gpus_per_worker=8))
    assert [(c.cluster, c.pool) for c in result.ranked] == [("a", "big")]
    assert "a" not in result.excluded


def test_take_books_gpus_for_the_rest_of_the_pass(kit):
    fleet = kit.fleet([kit.snap("a", kit.pool("a", [8])), kit.snap("b", kit.pool("b", [8]))])
    spec = kit.spec(gpus_per_worker=8)
    first = kit.place(fleet, spec).best
    fleet.take(first)
    second = kit.place(fleet, spec).best
    assert second.cluster != first.cluster
    fleet.take(second)
    third = kit.place(fleet, spec)
    assert third.ranked == [] and third.reason == "capacity"


def test_mig_slices_pack_like_gpus(kit):
    pool = kit.pool("a", [7, 3], model=kit.A100_80, part="1g.10gb", total=7)
    fleet = kit.fleet([kit.snap("a", pool)])
    spec = kit.spec(gpu_class="a100-80gb", mig_profile="1g.10gb", gpus_per_worker=3, workers=3)
    assert sorted(kit.place(fleet, spec).best.assignment) == ["a-gpu-n0", "a-gpu-n0",
                                                                "a-gpu-n1"]


def test_worker_larger_than_any_node_is_a_clean_exclusion(kit):
    fleet = kit.fleet([kit.snap("a", kit.pool("a", [8]))])
    result = kit.place(fleet, kit.spec(gpus_per_worker=32))  # bypasses spec validation
    assert result.excluded["a"].rule == "never_fits" and result.reason == "policy"
