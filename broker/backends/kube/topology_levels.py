"""Where each node sits in a Kubernetes cluster's topology, as its queueing layer describes it.

Kueue (Topology-Aware Scheduling): a ``Topology`` lists node labels from the widest level to
the narrowest (block, rack, host...); a ResourceFlavor names it in ``topologyName``, and a
node of that flavor sits, at each level, in the domain its label gives.  The level is called
by its label, the cluster's own name for it.

Volcano: ``HyperNode`` objects of ``tier`` 1 (the narrowest) up, each naming its members,
nodes at tier 1 and HyperNodes above, by exact name, regular expression or (nodes) labels.
A node's levels are the HyperNodes that hold it, directly or through one below, called
"tier N".

Either way a node's levels run from the widest down, as (level, domain) pairs; a cluster
without these objects (or whose API does not serve them) has none.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any, Iterable, Mapping

from broker.backends.json_fields import Fields
from broker.cluster_report import NodeLevels


def topology_labels(topologies: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """Every node label the cluster's Kueue ``Topology`` objects use as a level."""
    out: dict[str, None] = {}
    for i, raw in enumerate(topologies):
        for lv in Fields(raw, (f"topologies[{i}]",)).obj("spec").objs("levels"):
            out[lv.text("nodeLabel")] = None
    return tuple(out)


def kueue_levels(
    topologies: Iterable[Mapping[str, Any]], flavors: Iterable[Mapping[str, Any]], nodes: Iterable[Mapping[str, Any]]
) -> NodeLevels:
    """node -> its domain at each level of the Topology its flavor names."""
    levels: dict[str, list[str]] = {}
    for i, raw in enumerate(topologies):
        topo = Fields(raw, (f"topologies[{i}]",))
        levels[topo.obj("metadata").text("name")] = [lv.text("nodeLabel") for lv in topo.obj("spec").objs("levels")]
    named = []
    for i, raw in enumerate(flavors):
        spec = Fields(raw, (f"resourceflavors[{i}]",)).obj("spec")
        if spec.text("topologyName") in levels:
            named.append((spec.texts("nodeLabels"), levels[spec.text("topologyName")]))
    named.sort(key=lambda f: -len(f[0]))  # the most specific flavor, as pools are named
    out: NodeLevels = {}
    for name, labels in _nodes(nodes):
        for wanted, labels_of_levels in named:
            if all(labels.get(k) == v for k, v in wanted.items()):
                found = tuple((label, labels[label]) for label in labels_of_levels if label in labels)
                if found:
                    out[name] = found
                break
    return out


def volcano_levels(hypernodes: Iterable[Mapping[str, Any]], nodes: Iterable[Mapping[str, Any]]) -> NodeLevels:
    """node -> "tier N" and the HyperNode holding it at each tier, the widest first."""
    tiers: dict[str, int] = {}
    members: dict[str, list[tuple[str, Fields]]] = {}
    for i, raw in enumerate(hypernodes):
        hn = Fields(raw, (f"hypernodes[{i}]",))
        name, spec = hn.obj("metadata").text("name"), hn.obj("spec")
        tiers[name] = _int(spec.value("tier"))
        members[name] = [(m.text("type", "Node"), m.obj("selector")) for m in spec.objs("members")]
    parents: dict[str, set[str]] = defaultdict(set)
    for parent, ms in members.items():
        for child in tiers:
            if any(kind == "HyperNode" and _selects(sel, child, {}) for kind, sel in ms):
                parents[child].add(parent)
    out: NodeLevels = {}
    for name, labels in _nodes(nodes):
        held = {hn for hn, ms in members.items() if any(k == "Node" and _selects(s, name, labels) for k, s in ms)}
        frontier = list(held)
        while frontier:
            for parent in parents[frontier.pop()] - held:
                held.add(parent)
                frontier.append(parent)
        if held:
            out[name] = tuple((tier_level(tiers[hn]), hn) for hn in sorted(held, key=lambda h: (-tiers[h], h)))
    return out


def tier_level(tier: int) -> str:
    """The level name of a HyperNode tier."""
    return f"tier {tier}"


def _selects(selector: Fields, name: str, labels: Mapping[str, str]) -> bool:
    exact, regex, by_label = selector.obj("exactMatch"), selector.obj("regexMatch"), selector.obj("labelMatch")
    if exact.raw:
        return exact.text("name") == name
    if regex.raw:
        try:
            return re.search(regex.text("pattern"), name) is not None
        except re.error:
            return False  # Volcano's webhook refuses such a pattern; matching none is safe
    if by_label.raw:
        wanted = by_label.texts("matchLabels")
        return bool(wanted) and all(labels.get(k) == v for k, v in wanted.items())
    return False


def _nodes(nodes: Iterable[Mapping[str, Any]]) -> Iterable[tuple[str, Mapping[str, str]]]:
    for i, raw in enumerate(nodes):
        meta = Fields(raw, (f"nodes[{i}]",)).obj("metadata")
        yield meta.text("name"), meta.texts("labels")


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0
