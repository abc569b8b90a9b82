"""Where each node sits in a Slurm cluster's topology (``scontrol show topology``)."""
from __future__ import annotations

from broker.backends.slurm.topology_levels import parse_topology
from broker.cluster_report import NodeInventory

from .test_backend import backend

# topology/tree as 23.02 and later print it: an upper switch lists every node below it
TREE = """\
SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=n[1-2]
SwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=n[3-4]
SwitchName=spine Level=1 LinkSpeed=1 Nodes=n[1-4] Switches=leaf[1-2]
"""
# 22.05 names the nodes at the leaves only
TREE_LEAVES_ONLY = """\
SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=n[1-2]
SwitchName=spine Level=1 LinkSpeed=1 Switches=leaf1
"""
BLOCK = """\
BlockName=b1 BlockIndex=0 Nodes=n[1-2] BlockSize=2
BlockName=b2 BlockIndex=1 Nodes=n[3-4] BlockSize=2
"""


def test_a_tree_gives_each_node_its_switches_widest_first():
    levels = parse_topology(TREE)
    assert levels["n1"] == (("switch level 1", "spine"), ("switch level 0", "leaf1"))
    assert levels["n4"] == (("switch level 1", "spine"), ("switch level 0", "leaf2"))


def test_a_node_named_at_its_leaf_only_still_gets_the_switches_above():
    assert parse_topology(TREE_LEAVES_ONLY)["n2"] == (("switch level 1", "spine"), ("switch level 0", "leaf1"))


def test_blocks_are_one_level():
    levels = parse_topology(BLOCK)
    assert levels["n3"] == (("block", "b2"),) and levels["n1"] == (("block", "b1"),)


def test_a_cluster_without_a_topology_plugin_has_no_levels():
    assert parse_topology("No topology information available\n") == {}


def test_the_inventory_carries_each_nodes_levels_and_stores_them():
    b, transport = backend()
    transport.levels = parse_topology(TREE)
    n1, n2 = b.inventory().pools[1].nodes
    assert n2.topology == (("switch level 1", "spine"), ("switch level 0", "leaf1"))
    stored = NodeInventory.from_json(n2.to_json(), gpu_model="a100", gpu_memory_gb=80, partitioning="whole",
                                     owner="slurm")
    assert stored.topology == n2.topology
    # a node stored before levels existed reads as having none
    old = {k: v for k, v in n1.to_json().items() if k != "topology"}
    assert NodeInventory.from_json(old, gpu_model="a100", gpu_memory_gb=80, partitioning="whole",
                                   owner="slurm").topology == ()
