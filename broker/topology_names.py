"""Which of a cluster's own topology levels a job's ``topology_level`` means.

Each control plane names its levels its own way (a Kueue ``Topology``'s node labels, Volcano's
HyperNode tiers, Slurm's switches and blocks; ``NodeInventory.topology``). A job may name a
level three ways, matched in this order:

- ``host``: the node itself, on every cluster (a gang that must share a host runs on one node);
- a cluster's own level name, exactly (``cloud.example.com/rack``, ``tier 2``, ``switch level 1``);
- ``rack`` or ``block``, which mean, on each cluster, the one level named as below.

- ``rack``: on Kueue, a node label whose last part is ``rack`` or ends in ``-rack``; on
  Volcano, ``tier 1``; on Slurm, ``switch level 0`` (a leaf switch);
- ``block``: on Kueue, a label whose last part is ``block`` or ends in ``-block``; on Slurm,
  ``block`` (topology/block); on Volcano none (name the tier).

A cluster that describes no such level has none: a gang that requires it does not go there.
Plain data: placement and the backends both read it, so dispatch passes on the level
placement packed by.
"""

from __future__ import annotations

import re
from typing import Iterable

HOST = "host"
GENERIC = ("host", "rack", "block")
MODES = ("required", "preferred")
# a level as a job names it: a generic name or a control plane's own (label, "tier 2")
LEVEL_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9 ./_-]{0,61}[A-Za-z0-9])?$")

_SAME_NAME = {"tier 1": "rack", "switch level 0": "rack", "block": "block"}


def generic_name(own: str) -> str:
    """The generic name (``rack``, ``block``, ``host``) a cluster's own level stands for, or ""."""
    if own in _SAME_NAME:
        return _SAME_NAME[own]
    tail = own.lower().rsplit("/", 1)[-1]
    if tail == "hostname":
        return HOST
    for word in ("rack", "block"):
        if tail == word or tail.endswith(f"-{word}"):
            return word
    return ""


def resolve_level(asked: str, own_levels: Iterable[str]) -> str | None:
    """The cluster's own level that ``asked`` means: ``host`` for the node itself, an own
    level name, or None when the cluster describes no such level."""
    if asked == HOST:
        return HOST
    names = list(own_levels)
    if asked in names:
        return asked
    for own in names:
        if generic_name(own) == asked:
            return own
    return None
