"""Where each node sits in a Slurm cluster's topology, from ``scontrol show topology``.

topology/tree prints a switch a line, ``SwitchName=s1 Level=0 LinkSpeed=1 Nodes=n[1-2]``,
an upper switch naming its ``Switches=`` and, since 23.02, every node below it in
``Nodes=``; topology/block (23.11 and later) prints ``BlockName=b1 BlockIndex=0
Nodes=n[1-4] BlockSize=4``.  With topology/none (or default/flat) it prints "No topology
information available" and the cluster has no levels.  Switches of the tree are named for
their level ("switch level 0" is a leaf: its nodes share a switch, what ``--switches=1``
asks); a node's levels run from the widest down.
"""

from __future__ import annotations

from collections import defaultdict

from broker.backends.slurm import parsers
from broker.backends.slurm.values import number
from broker.cluster_report import NodeLevels


def parse_topology(text: str) -> NodeLevels:
    """node -> ((level, domain), ...), the widest level first."""
    found: dict[str, list[tuple[int, str, str]]] = defaultdict(list)
    parents: dict[str, str] = {}
    switches: dict[str, tuple[int, tuple[str, ...]]] = {}
    for line in text.splitlines():
        kv = parsers.parse_kv_line(line)
        if "SwitchName" in kv:
            level = number(kv.get("Level"))
            switches[kv["SwitchName"]] = (level, parsers.expand_hostlist(kv.get("Nodes", "")))
            for child in parsers.expand_hostlist(kv.get("Switches", "")):
                parents[child] = kv["SwitchName"]
        elif "BlockName" in kv:
            for node in parsers.expand_hostlist(kv.get("Nodes", "")):
                found[node].append((10_000, "block", kv["BlockName"]))
    for name, (_, nodes) in switches.items():
        for node in nodes:
            _add(found, node, name, switches, parents)
    return {
        node: tuple((label, domain) for _, label, domain in sorted(set(levels), reverse=True))
        for node, levels in found.items()
    }


def _add(
    found: dict[str, list[tuple[int, str, str]]],
    node: str,
    switch: str,
    switches: dict[str, tuple[int, tuple[str, ...]]],
    parents: dict[str, str],
) -> None:
    """The switch and, where an older Slurm lists a node at its leaf only, every switch
    above it."""
    seen: set[str] = set()
    while switch and switch not in seen:
        seen.add(switch)
        level = switches.get(switch, (0, ()))[0]
        found[node].append((level, f"switch level {level}", switch))
        switch = parents.get(switch, "")
