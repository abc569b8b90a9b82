"""Each node's topology levels as Kueue's Topology objects and Volcano's HyperNodes describe
them (objects shaped as the real APIs serve them)."""
from __future__ import annotations

from broker.backends.kube.topology_levels import kueue_levels, volcano_levels

BLOCK, RACK, HOST = "cloud.example.com/block", "cloud.example.com/rack", "kubernetes.io/hostname"


def node(name, **labels):
    return {"metadata": {"name": name, "labels": {HOST: name, **labels}}}


def flavor(name, topology="", **labels):
    spec = {"nodeLabels": labels}
    if topology:
        spec["topologyName"] = topology
    return {"metadata": {"name": name}, "spec": spec}


TOPOLOGY = {"metadata": {"name": "dc"}, "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK},
                                                            {"nodeLabel": HOST}]}}


def test_a_kueue_node_sits_at_each_level_of_its_flavors_topology_widest_first():
    nodes = [node("a-0", gpu="a100", **{BLOCK: "b1", RACK: "r1"}), node("a-1", gpu="a100", **{BLOCK: "b1", RACK: "r2"})]
    levels = kueue_levels([TOPOLOGY], [flavor("a100", "dc", gpu="a100")], nodes)
    assert levels["a-1"] == ((BLOCK, "b1"), (RACK, "r2"), (HOST, "a-1"))


def test_a_node_whose_flavor_names_no_topology_has_no_levels():
    nodes = [node("h-0", gpu="h100", **{BLOCK: "b1", RACK: "r1"}), node("x-0", **{RACK: "r9"})]
    levels = kueue_levels([TOPOLOGY], [flavor("a100", "dc", gpu="a100"), flavor("h100", gpu="h100")], nodes)
    assert levels == {}


def test_a_level_the_node_lacks_the_label_of_is_left_out():
    levels = kueue_levels([TOPOLOGY], [flavor("a100", "dc", gpu="a100")], [node("a-0", gpu="a100", **{RACK: "r1"})])
    assert levels["a-0"] == ((RACK, "r1"), (HOST, "a-0"))


def hypernode(name, tier, *members):
    return {"metadata": {"name": name}, "spec": {"tier": tier, "members": list(members)}}


def exact(name, kind="Node"):
    return {"type": kind, "selector": {"exactMatch": {"name": name}}}


def test_a_volcano_node_is_held_by_its_hypernodes_at_every_tier():
    hns = [
        hypernode("rack-1", 1, exact("n-0"), {"type": "Node", "selector": {"regexMatch": {"pattern": "^n-[12]$"}}}),
        hypernode("rack-2", 1, {"type": "Node", "selector": {"labelMatch": {"matchLabels": {RACK: "r2"}}}}),
        hypernode("spine", 2, exact("rack-1", "HyperNode"), exact("rack-2", "HyperNode")),
    ]
    nodes = [node("n-0"), node("n-2"), node("m-7", **{RACK: "r2"}), node("lonely")]
    levels = volcano_levels(hns, nodes)
    assert levels["n-0"] == (("tier 2", "spine"), ("tier 1", "rack-1"))
    assert levels["n-2"] == (("tier 2", "spine"), ("tier 1", "rack-1"))
    assert levels["m-7"] == (("tier 2", "spine"), ("tier 1", "rack-2"))
    assert "lonely" not in levels


def test_a_hypernode_pattern_volcano_would_refuse_matches_nothing():
    hns = [hypernode("bad", 1, {"type": "Node", "selector": {"regexMatch": {"pattern": "n-[("}}})]
    assert volcano_levels(hns, [node("n-0")]) == {}
