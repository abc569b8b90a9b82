"""Gang packing: put every worker of a gang entirely on one node, all in one pool.

Free GPUs summed across nodes say nothing about whether a gang fits: four nodes with 2
free GPUs each hold four 2-GPU workers but not two 4-GPU workers.  A node with ``f``
free GPUs hosts exactly ``f // g`` workers of ``g`` GPUs, and nodes are independent, so a
gang of ``w`` workers fits iff ``sum(f // g) >= w``.  ``CapacityIndex`` keeps that sum
for every ``g`` in 1..16 up to date, so the per-decision fit check is one list lookup.

Assignment is best-fit: workers go to the nodes with the fewest free GPUs that still
fit, which keeps large holes open for large workers.  With identical workers this is
the same as best-fit decreasing, and it never fails when the sum says the gang fits.

On Slurm each worker takes a node of its own (the backend asks ``--nodes=workers``, one
task a node): there a node hosts one worker when ``f >= g``, and a gang fits iff that many
nodes have room; ``nodes_with[g]`` keeps the count (``PoolIndex(one_per_node=True)``).
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Iterable, Mapping, Sequence

from broker.topology_names import HOST

MAX_GPUS_PER_WORKER = 16  # WorkloadSpec limit; the capacity tables are sized by it
_GS = range(1, MAX_GPUS_PER_WORKER + 1)


def workers_on(free: int, gpus_per_worker: int, one_per_node: bool = False) -> int:
    """Workers of ``gpus_per_worker`` GPUs one node with ``free`` GPUs hosts (at most one on
    Slurm)."""
    fit = free // gpus_per_worker
    return min(fit, 1) if one_per_node else fit


def gang_capacity(free: Iterable[int], gpus_per_worker: int) -> int:
    """How many workers of ``gpus_per_worker`` GPUs these nodes can host at once."""
    return sum(f // gpus_per_worker for f in free if f > 0)


def pack_gang(free: Sequence[int], gpus_per_worker: int, workers: int) -> list[int] | None:
    """Reference packer: the node index of each worker, or None when the gang won't fit."""
    order = sorted(range(len(free)), key=lambda i: (free[i], i))
    placed: list[int] = []
    for i in order:
        if free[i] < gpus_per_worker:
            continue
        take = min(free[i] // gpus_per_worker, workers - len(placed))
        placed.extend([i] * take)
        if len(placed) == workers:
            return placed
    return None


class CapacityIndex:
    """Nodes bucketed by free GPUs, plus ``cap[g]`` = workers of g GPUs they can host."""

    __slots__ = ("cap", "nodes_with", "buckets", "_keys")

    def __init__(self) -> None:
        self.cap: list[int] = [0] * (MAX_GPUS_PER_WORKER + 1)
        self.nodes_with: list[int] = [0] * (MAX_GPUS_PER_WORKER + 1)  # nodes with >= g free
        # free count -> node indexes (a dict as an insertion-ordered set: deterministic)
        self.buckets: dict[int, dict[int, None]] = {}
        self._keys: list[int] | None = []  # sorted bucket keys; None: rebuild on demand

    def add(self, node: int, free: int) -> None:
        if free <= 0:
            return
        bucket = self.buckets.get(free)
        if bucket is None:
            bucket = self.buckets[free] = {}
            self._keys = None
        bucket[node] = None
        cap, nodes_with = self.cap, self.nodes_with
        for g in _GS:
            cap[g] += free // g
        for g in range(1, min(free, MAX_GPUS_PER_WORKER) + 1):
            nodes_with[g] += 1

    def remove(self, node: int, free: int) -> None:
        if free <= 0:
            return
        bucket = self.buckets[free]
        del bucket[node]
        if not bucket:
            del self.buckets[free]
            self._keys = None
        cap, nodes_with = self.cap, self.nodes_with
        for g in _GS:
            cap[g] -= free // g
        for g in range(1, min(free, MAX_GPUS_PER_WORKER) + 1):
            nodes_with[g] -= 1

    def assign(self, gpus_per_worker: int, workers: int, one_per_node: bool = False) -> list[int] | None:
        """Best-fit: node index per worker, or None if the gang does not fit here."""
        if (self.nodes_with if one_per_node else self.cap)[gpus_per_worker] < workers:
            return None
        keys = self._keys
        if keys is None:
            keys = self._keys = sorted(self.buckets)
        start = bisect_left(keys, gpus_per_worker)
        if workers == 1:  # the common case: the first node of the tightest bucket
            return [next(iter(self.buckets[keys[start]]))]
        placed: list[int] = []
        for free in keys[start:]:
            per_node = workers_on(free, gpus_per_worker, one_per_node)
            for node in self.buckets[free]:
                placed.extend([node] * min(per_node, workers - len(placed)))
                if len(placed) == workers:
                    return placed
        raise AssertionError("capacity table out of step with buckets")  # pragma: no cover


class PoolIndex:
    """Free GPUs of one pool's usable nodes, indexed for O(1) gang-fit checks.

    Nodes without an interconnect domain count as a domain of their own: a gang that
    needs one interconnect can share such a node but never span two of them.  ``levels``:
    each topology level's domain per node (``NodeInventory.topology``), indexed the same way
    the first time a gang asks for that level; ``host`` (each node its own) is always there.
    """

    __slots__ = ("names", "free", "domains", "all", "by_domain", "one_per_node", "level_domains", "_by_level", "_best")

    def __init__(
        self,
        names: Sequence[str],
        free: Sequence[int],
        domains: Sequence[str],
        one_per_node: bool = False,
        levels: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.one_per_node = one_per_node  # Slurm: a node per worker
        self.names = tuple(names)
        self.free = list(free)
        self.domains = tuple(d or f"\0node:{n}" for n, d in zip(names, domains, strict=True))
        self.all = CapacityIndex()
        self.by_domain: dict[str, CapacityIndex] = {}
        for i, f in enumerate(self.free):
            self.all.add(i, f)
            self.by_domain.setdefault(self.domains[i], CapacityIndex()).add(i, f)
        self.level_domains: dict[str, tuple[str, ...]] = {HOST: self.names}
        for level, of_nodes in (levels or {}).items():
            self.level_domains[level] = tuple(d or f"\0node:{n}" for n, d in zip(names, of_nodes, strict=True))
        self._by_level: dict[str, dict[str, CapacityIndex]] = {}
        self._best: dict[str, list[int]] = {}  # per grouping ("" = interconnect), per g

    def _groups(self, level: str) -> dict[str, CapacityIndex]:
        """The nodes grouped by their domain at ``level`` ("": the interconnect domain)."""
        if not level:
            return self.by_domain
        groups = self._by_level.get(level)
        if groups is None:
            of_nodes = self.level_domains[level]
            groups = self._by_level[level] = {}
            for i, f in enumerate(self.free):
                groups.setdefault(of_nodes[i], CapacityIndex()).add(i, f)
        return groups

    def best_domain_cap(self, level: str = "") -> list[int]:
        """Per g, the most workers any single domain (of ``level``; "": interconnect) can host."""
        best = self._best.get(level)
        if best is None:
            caps = [self.table(d) for d in self._groups(level).values()]
            best = self._best[level] = [max((c[g] for c in caps), default=0) for g in range(MAX_GPUS_PER_WORKER + 1)]
        return best

    def table(self, index: CapacityIndex) -> list[int]:
        """Per g, the workers of g GPUs ``index``'s nodes host, as this pool places them."""
        return index.nodes_with if self.one_per_node else index.cap

    def capacity(self, gpus_per_worker: int, same_domain: bool, level: str = "") -> int:
        """Workers of ``gpus_per_worker`` GPUs the pool hosts now: in all, within one
        interconnect domain (``same_domain``) or within one domain of ``level``."""
        if not 1 <= gpus_per_worker <= MAX_GPUS_PER_WORKER:
            return 0
        if level or same_domain:
            return self.best_domain_cap(level)[gpus_per_worker]
        return self.table(self.all)[gpus_per_worker]

    def assign(self, gpus_per_worker: int, workers: int, same_domain: bool, level: str = "") -> list[int] | None:
        if self.capacity(gpus_per_worker, same_domain, level) < workers:
            return None
        if not (same_domain or level) or workers == 1:
            return self.all.assign(gpus_per_worker, workers, self.one_per_node)
        # best-fit over domains too: the smallest domain that holds the whole gang
        groups = self._groups(level)
        fitting = [
            (self.table(idx)[gpus_per_worker], name)
            for name, idx in groups.items()
            if self.table(idx)[gpus_per_worker] >= workers
        ]
        if not fitting:
            return None
        return groups[min(fitting)[1]].assign(gpus_per_worker, workers, self.one_per_node)

    def take(self, nodes: Iterable[int], gpus_per_worker: int) -> None:
        """Mark GPUs as used (a placement made in this pass), keeping the indexes exact."""
        for node in nodes:
            self.set_free(node, self.free[node] - gpus_per_worker)

    def set_free(self, node: int, new_free: int) -> None:
        old = self.free[node]
        if new_free < 0:
            raise ValueError(f"node {self.names[node]} would have {new_free} free GPUs")
        self.all.remove(node, old)
        self.all.add(node, new_free)
        domain = self.by_domain[self.domains[node]]
        domain.remove(node, old)
        domain.add(node, new_free)
        for level, groups in self._by_level.items():
            group = groups[self.level_domains[level][node]]
            group.remove(node, old)
            group.add(node, new_free)
        self.free[node] = new_free
        self._best.clear()
