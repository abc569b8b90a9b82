"""Nodes the broker holds back from placement: a node whose GPUs failed a job's pre-flight
check is blocked until its block expires (``GPUBROKER_GPU_CHECK_BLOCK_S`` after the last
failure) or an admin resolves its escalation. Fleet facts, not tenant data: placement and the
clusters page read them."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Mapping

from broker.cluster_report import NodeInventory
from broker.lifecycle import UNRESOLVED_ESCALATION_STATES
from broker.models import Escalation, EscalationKind
from broker import runtime


@dataclass(frozen=True)
class NodeBlock:
    node: str
    reason: str  # the last failure's words: "GPU check failed on worker 1 (node n2)"
    until: datetime
    failures: int
    escalation_id: int


def blocked_nodes(*, now: datetime | None = None) -> dict[int, dict[str, NodeBlock]]:
    """cluster id -> node name -> its block, for the blocks in force at ``now``."""
    now = now or runtime.now()
    out: dict[int, dict[str, NodeBlock]] = {}
    rows = Escalation.objects.filter(kind=EscalationKind.GPU_CHECK, state__in=UNRESOLVED_ESCALATION_STATES)
    for esc in rows.only("id", "cluster_id", "evidence"):
        block = _block(esc)
        if block is not None and block.until > now:
            out.setdefault(esc.cluster_id, {})[block.node] = block
    return out


def _block(esc: Escalation) -> NodeBlock | None:
    evidence = esc.evidence or {}
    try:
        until = datetime.fromisoformat(str(evidence["blocked_until"]))
        return NodeBlock(
            node=str(evidence["node"]),
            reason=str(evidence.get("reason", "")),
            until=until,
            failures=int(evidence.get("failures", 1)),
            escalation_id=esc.id,
        )
    except (KeyError, TypeError, ValueError):
        return None  # an escalation written by hand without a block: nothing is blocked


def held_back(node: NodeInventory, blocks: Mapping[str, NodeBlock]) -> NodeInventory:
    """The node as the broker takes it: out of service, with the block's words, while blocked
    (its GPUs then count nowhere as idle: the stored pools, ``/clusters/``, ``/fleet/``,
    placement)."""
    block = blocks.get(node.name)
    if block is None:
        return node
    why = f"blocked by the broker until {block.until:%Y-%m-%d %H:%M} UTC: {block.reason}"
    return replace(node, healthy=False, health_reason=f"{why} (escalation {block.escalation_id})")
