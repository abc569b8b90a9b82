"""A job's topology level, as each cluster names it (``broker.topology_names``)."""
from __future__ import annotations

import pytest

from broker.topology_names import generic_name, resolve_level


@pytest.mark.parametrize(
    "own, generic",
    [
        ("cloud.example.com/rack", "rack"),
        ("example.com/gpu-rack", "rack"),
        ("cloud.provider.com/topology-block", "block"),
        ("kubernetes.io/hostname", "host"),
        ("tier 1", "rack"),
        ("tier 2", ""),
        ("switch level 0", "rack"),
        ("switch level 1", ""),
        ("block", "block"),
        ("nvidia.com/gpu.clique", ""),
        ("example.com/rackspace", ""),
    ],
)
def test_each_control_planes_own_level_names_stand_for_a_generic_one_or_none(own, generic):
    assert generic_name(own) == generic


def test_host_is_every_clusters_level_and_an_own_name_matches_exactly():
    assert resolve_level("host", []) == "host"
    assert resolve_level("tier 2", ["tier 2", "tier 1"]) == "tier 2"
    assert resolve_level("rack", ["tier 2", "tier 1"]) == "tier 1"
    assert resolve_level("rack", ["cloud.example.com/block", "cloud.example.com/rack"]) == "cloud.example.com/rack"


def test_a_level_the_cluster_does_not_describe_resolves_to_none():
    assert resolve_level("block", ["tier 2", "tier 1"]) is None
    assert resolve_level("rack", []) is None
    assert resolve_level("Tier 2", ["tier 2"]) is None  # own names match exactly
