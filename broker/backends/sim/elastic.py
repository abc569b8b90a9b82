"""Elastic pools: a cloud pool that grows on demand and shrinks when idle.

A node group with ``max_count`` above its ``count`` keeps ``count`` nodes up always; the rest
come when the scheduler cannot place a waiting job on what is up or already coming (as a
cluster autoscaler, or Kueue's ProvisioningRequest check, asks for nodes for pods that do
not fit): requested at once, usable ``provisioning_s`` later.  A node up and idle for
``idle_release_s`` is released.  Each node is billed from its request to its release, idle
time included (``billed_s``), which is what a cloud bill charges.

Pure functions over the cluster's nodes at its cursor; the cluster calls them in its
catch-up loop (``settle`` after each event, ``request_for`` after each scheduling pass) and
adds ``next_event`` to its own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from broker.backends.base import JobState, Reason
from broker.backends.sim.model import JobRequest, SimJob, SimNode
from broker.backends.sim.placement import matching_pools


# why a job waits that more nodes would change: no room on the nodes up (or none up at all)
GROWS = (Reason.CAPACITY, Reason.UNAVAILABLE)


def next_event(nodes: Iterable[SimNode]) -> float | None:
    """When a node next comes up or is released (None: no elastic node will change)."""
    times = [_change_at(n) for n in nodes if n.elastic]
    return min((t for t in times if t is not None), default=None)


def _change_at(node: SimNode) -> float | None:
    if node.ready_at is not None:
        return node.ready_at  # provisioning: up then
    if node.up and node.idle_since is not None:
        return node.idle_since + node.idle_release_s  # idle: released then
    return None


def settle(nodes: Iterable[SimNode], cursor: float) -> bool:
    """Bring up the nodes whose provisioning ended, release those idle long enough, and
    start or stop each up node's idle clock; whether any node came or went."""
    changed = False
    for node in nodes:
        if not node.elastic:
            continue
        if node.ready_at is not None and node.ready_at <= cursor:
            node.up, node.idle_since = True, node.ready_at
            node.ready_at, changed = None, True
        if not node.up:
            continue
        if node.allocated > 0:
            node.idle_since = None
        elif node.idle_since is None:
            node.idle_since = cursor
        elif node.idle_since + node.idle_release_s <= cursor:
            released = node.idle_since + node.idle_release_s
            node.billed_s += released - (node.requested_at if node.requested_at is not None else released)
            node.up, node.idle_since, node.requested_at, changed = False, None, None, True
    return changed


def request_for(pending: Sequence[SimJob], by_pool: Mapping[str, Sequence[SimNode]], cursor: float) -> bool:
    """Request the nodes the jobs waiting for capacity need beyond what is up or coming,
    in queue order (what is coming is counted once: the first waiting job claims it);
    whether any was requested."""
    coming: dict[str, int] = {}  # node name -> free units on a node still provisioning, unclaimed
    requested = False
    for job in pending:
        if job.state is not JobState.PENDING or job.reason not in GROWS:
            continue  # waiting for quota or a limit: more nodes would not start it
        for nodes in _elastic_pools(by_pool, job.request):
            need = job.request.workers - _slots(nodes, job.request, coming)
            if need > 0:
                absent = [n for n in nodes if n.elastic and not n.up and n.ready_at is None]
                per_node = absent[0].gpus // job.request.gpus_per_worker if absent else 0
                if per_node <= 0 or math.ceil(need / per_node) > len(absent):
                    continue  # this pool cannot grow enough for it
                for node in absent[: math.ceil(need / per_node)]:
                    node.requested_at, node.ready_at = cursor, cursor + node.provisioning_s
                    coming[node.name] = node.gpus - per_node * job.request.gpus_per_worker
                    requested = True
            ready = [n.ready_at for n in nodes if n.ready_at is not None]
            if ready:  # it waits for them (as a ProvisioningRequest's check says)
                job.reason = Reason.CAPACITY
                job.raw_reason = f"waiting for nodes to be provisioned (the last ready in {max(ready) - cursor:.0f} s)"
            break
    return requested


def _elastic_pools(by_pool: Mapping[str, Sequence[SimNode]], req: JobRequest) -> list[Sequence[SimNode]]:
    """The elastic pools the scheduler would place the job on: its own rule (model, memory,
    partitioning and GPU class), so that no node is asked for that the job could not use."""
    serving = matching_pools((nodes[0] for nodes in by_pool.values()), req)
    return [by_pool[p] for p in serving if any(n.elastic for n in by_pool[p])]


def _slots(nodes: Sequence[SimNode], req: JobRequest, coming: dict[str, int]) -> int:
    """Workers of the job that fit on the pool's free GPUs and on its nodes still coming
    (claiming those: a later job does not count them again)."""
    g, slots = req.gpus_per_worker, 0
    for node in nodes:
        if node.ready_at is not None:
            free = coming.setdefault(node.name, node.gpus)
            take = min(free // g, req.workers - slots)
            coming[node.name] = free - take * g
            slots += take
        elif node.usable:
            slots += node.free // g
        if slots >= req.workers:
            break
    return slots


def billed_node_seconds(nodes: Iterable[SimNode], cursor: float) -> dict[str, float]:
    """Per pool: the node-seconds billed so far, the requests still open counted to ``cursor``."""
    out: dict[str, float] = {}
    for node in nodes:
        if node.elastic:
            out[node.pool] = out.get(node.pool, 0.0) + _billed_s(node, cursor)
    return out


def idle_billed_gpu_seconds(nodes: Iterable[SimNode], jobs: Iterable[SimJob], cursor: float) -> float:
    """GPU-seconds billed on the elastic nodes that no job used: requested and provisioning,
    and idle until released (what a cloud bill charges beyond the jobs' own GPU time)."""
    elastic = {n.name: n for n in nodes if n.elastic}
    billed = sum(_billed_s(n, cursor) * n.gpus for n in elastic.values())
    busy = 0.0
    for job in jobs:
        if job.started_at is None:
            continue
        ran = (job.ended_at if job.ended_at is not None else cursor) - job.started_at
        busy += sum(gpus * ran for name, gpus in job.placement if name in elastic)
    return max(0.0, billed - busy)


def _billed_s(node: SimNode, cursor: float) -> float:
    """The node's billed seconds: its released requests, and the one still open to ``cursor``."""
    return node.billed_s + (cursor - node.requested_at if node.requested_at is not None else 0.0)
