"""Which nodes may take a job, and packing whole workers onto them.

A job runs in one pool (one GPU model, memory and partitioning): mixing models inside a
gang is what real GPU jobs avoid.  Each worker lands on exactly one node; several workers
may share a node, except on Slurm (``one_per_node``: the backend asks for a node per
worker).  Free GPUs are never summed across nodes: a worker needs them all on its node.
"""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

from broker.backends.sim.model import JobRequest, SimNode
from broker.spec import partitioning_serves

FreeFn = Callable[[SimNode], int]
Placement = list[tuple[str, int]]


def free_now(node: SimNode) -> int:
    return node.free


def free_if_idle(node: SimNode) -> int:
    """Capacity were every running job gone (down or draining nodes still count zero; an
    elastic pool's node not up yet counts: the pool adds it on demand, sim.elastic)."""
    return node.gpus if node.healthy and not node.draining else 0


def free_if_built(node: SimNode) -> int:
    """Capacity as configured, whatever the nodes' health: 'could this ever run here?'"""
    return node.gpus


def matching_pools(nodes: Iterable[SimNode], req: JobRequest) -> list[str]:
    """Pools (in node order) whose GPUs satisfy the request's model, memory and MIG profile."""
    reps: dict[str, SimNode] = {}
    for node in nodes:
        reps.setdefault(node.pool, node)
    cands = [
        (p, n)
        for p, n in reps.items()
        if partitioning_serves(n.partitioning, req.partitioning) and n.gpu_memory_gb >= req.min_gpu_memory_gb
    ]
    if req.gpu_models:
        wanted = {m.strip().lower() for m in req.gpu_models}
        return [p for p, n in cands if p in wanted or n.gpu_model.lower() in wanted]
    if req.gpu_class:
        cls = req.gpu_class.strip().lower()
        exact = [p for p, n in cands if cls in (p, n.gpu_model.lower())]
        # a class such as "a100-80gb" names a pool; "large-a100" only mentions a model
        return exact or [p for p, n in cands if n.gpu_model.lower() in cls]
    return [p for p, _ in cands]


def _domains(nodes: Sequence[SimNode], req: JobRequest) -> list[list[SimNode]]:
    if req.exclude_nodes:
        nodes = [n for n in nodes if n.name not in req.exclude_nodes]
    if req.same_host and req.workers > 1:
        return [[node] for node in nodes]
    if not req.one_domain:
        return [list(nodes)]
    groups: dict[str, list[SimNode]] = {}
    for node in nodes:
        groups.setdefault(node.interconnect_domain, []).append(node)
    return list(groups.values())


def _pack_one(nodes: Sequence[SimNode], req: JobRequest, free: FreeFn) -> Placement | None:
    # best fit: fill the fullest nodes first so that whole empty nodes stay for big jobs
    if req.workers == 1 and req.gpus_per_worker > 0:
        return _pack_single(nodes, req.gpus_per_worker, free)
    placement: Placement = []
    left = req.workers
    for node in sorted(nodes, key=free):
        fit = min(left, _workers_on(free(node), req))
        placement += [(node.name, req.gpus_per_worker)] * fit
        left -= fit
        if not left:
            return placement
    return None


def _workers_on(free: int, req: JobRequest) -> int:
    """Workers of the request one node with ``free`` GPUs takes."""
    fit = free // req.gpus_per_worker
    return min(fit, 1) if req.one_per_node else fit


def _pack_single(nodes: Sequence[SimNode], gpus: int, free: FreeFn) -> Placement | None:
    """``_pack_one`` for one worker without sorting every node: the first node in the
    sorted order with room is the fullest one with room, the earliest on a tie (min()
    keeps the first of equals as the stable sort does)."""
    best, best_free = None, 0
    for node in nodes:
        room = free(node)
        if room >= gpus and (best is None or room < best_free):
            best, best_free = node, room
    return None if best is None else [(best.name, gpus)]


def pack(nodes: Sequence[SimNode], req: JobRequest, free: FreeFn = free_now) -> Placement | None:
    """One (node, gpus) entry per worker, or None when the whole gang does not fit."""
    for group in _domains(nodes, req):
        placement = _pack_one(group, req, free)
        if placement is not None:
            return placement
    return None


def placeable_workers(nodes: Sequence[SimNode], req: JobRequest, free: FreeFn = free_now) -> int:
    """How many workers of the gang would fit now (for 'k/n tasks unschedulable')."""
    best = 0
    for group in _domains(nodes, req):
        best = max(best, sum(_workers_on(free(n), req) for n in group))
    return min(best, req.workers)
