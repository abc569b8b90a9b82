"""The packer: property tests against its invariants, and the index against the packer."""
from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.placement import gang_capacity, pack_gang
from broker.placement.packing import PoolIndex

free_lists = st.lists(st.integers(min_value=0, max_value=16), min_size=0, max_size=24)
gpus = st.integers(min_value=1, max_value=16)
workers = st.integers(min_value=1, max_value=40)


def test_pack_examples():
    assert pack_gang([2, 2, 2, 2], 4, 2) is None
    assert pack_gang([2, 2, 2, 2], 2, 4) == [0, 1, 2, 3]
    assert pack_gang([8, 3], 2, 3) == [1, 0, 0]  # best fit: the small node first
    assert gang_capacity([2, 2, 2, 2], 4) == 0 and gang_capacity([2, 2, 2, 2], 2) == 4


def _check(free, g, w, assignment):
    if assignment is None:
        return
    assert len(assignment) == w  # every worker placed, each on exactly one node
    for node, count in Counter(assignment).items():
        assert count * g <= free[node], "a node was given more GPUs than it has free"


@settings(max_examples=300, deadline=None)
@given(free_lists, gpus, workers)
def test_reference_packer_never_overbooks_and_is_complete(free, g, w):
    assignment = pack_gang(free, g, w)
    _check(free, g, w, assignment)
    assert (assignment is not None) == (gang_capacity(free, g) >= w)


@settings(max_examples=300, deadline=None)
@given(free_lists, st.lists(st.sampled_from(["a", "b", ""]), min_size=24, max_size=24),
       gpus, workers, st.booleans())
def test_index_packer_never_overbooks_and_is_complete(free, domains, g, w, same):
    names = [f"n{i}" for i in range(len(free))]
    index = PoolIndex(names, free, domains[:len(free)])
    assignment = index.assign(g, w, same)
    _check(free, g, w, assignment)
    assert (assignment is not None) == (index.capacity(g, same) >= w)
    if same and w > 1 and assignment:
        assert len({index.domains[i] for i in assignment}) == 1
    # the capacity tables agree with a recount from scratch
    assert index.capacity(g, False) == gang_capacity(free, g)
    per_domain: dict[str, list[int]] = {}
    for i, f in enumerate(free):
        per_domain.setdefault(index.domains[i], []).append(f)
    expect = max((gang_capacity(v, g) for v in per_domain.values()), default=0)
    assert index.capacity(g, True) == expect


@settings(max_examples=200, deadline=None)
@given(free_lists, st.lists(st.tuples(gpus, st.integers(1, 6)), max_size=12))
def test_index_stays_exact_after_bookings(free, gangs):
    names = [f"n{i}" for i in range(len(free))]
    index = PoolIndex(names, free, ["d"] * len(free))
    current = list(free)
    for g, w in gangs:
        assignment = index.assign(g, w, False)
        _check(current, g, w, assignment)
        if assignment is not None:
            index.take(assignment, g)
            for node in assignment:
                current[node] -= g
        assert index.free == current
        for probe in range(1, 17):
            assert index.capacity(probe, False) == gang_capacity(current, probe)
            assert index.capacity(probe, True) == gang_capacity(current, probe)


@settings(max_examples=200, deadline=None)
@given(free_lists, st.lists(st.tuples(gpus, st.integers(1, 6)), max_size=12))
def test_a_slurm_index_gives_each_worker_its_own_node_and_stays_exact(free, gangs):
    names = [f"n{i}" for i in range(len(free))]
    index = PoolIndex(names, free, ["d"] * len(free), one_per_node=True)
    current = list(free)
    for g, w in gangs:
        fits = sum(f >= g for f in current)
        assert index.capacity(g, False) == index.capacity(g, True) == fits
        assignment = index.assign(g, w, False)
        assert (assignment is not None) == (fits >= w)
        if assignment is not None:
            assert len(set(assignment)) == w and all(current[i] >= g for i in assignment)
            index.take(assignment, g)
            for node in assignment:
                current[node] -= g
        assert index.free == current
