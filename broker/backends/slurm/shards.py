"""Slurm's GPU shares (``gres/shard``): a node's shards as a pool of their own, and what a job
of shards is charged.

A node configured ``Gres=gpu:a100:8,shard:32`` offers 8 whole GPUs or 32 shards, 4 a GPU; the
two draw on the same GPUs (Slurm gives a GPU either whole or in shards), so each pool counts
what the other holds: a GPU one shard job touches is not free for a whole-GPU job, and a GPU
held whole has no shard free.  Where shards sit among the GPUs Slurm does not say in the
node's record, so the GPUs the shards in use touch are counted as few as can hold them.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Callable, Iterable, Mapping

from broker.backends.slurm import parsers
from broker.backends.slurm.mapping import SHARD
from broker.backends.slurm.transport import GresItem, SlurmAcct, SlurmNode
from broker.cluster_report import NodeInventory

TRES_SHARD = "gres/shard"
log = logging.getLogger(__name__)


def _shard_count(items: Iterable[GresItem]) -> int:
    return sum(i.count for i in items if i.name == SHARD)


def shards_used(node: SlurmNode) -> int:
    """Shards held by running jobs: the node's AllocTRES (22.05's GresUsed counts a job's 3
    shards on one GPU as ``shard:a100:1(IDX:0)``), else GresUsed."""
    if TRES_SHARD in node.alloc_tres or node.gres_used is None:
        return tres_shards(node.alloc_tres)
    return _shard_count(node.gres_used)


def tres_shards(tres: Mapping[str, str]) -> int:
    """``gres/shard`` of a TRES dict (slurmdbd keeps it where AccountingStorageTRES lists it)."""
    value = tres.get(TRES_SHARD, "")
    return int(value) if value.isascii() and value.isdigit() else 0


def tres_units(tres: Mapping[str, str]) -> int:
    """What a job holds of a node's GPUs: its GPUs, else its shards."""
    return parsers.tres_gpus(tres) or tres_shards(tres)


def shards_per_gpu(node: SlurmNode) -> int:
    """Shards one GPU of the node is split into (0: the node has no shards)."""
    gpus = sum(i.count for i in parsers.gpu_items(node.gres))
    shards = _shard_count(node.gres)
    return max(1, shards // gpus) if gpus and shards else 0


def with_shards(node: SlurmNode, whole: list[tuple[str, NodeInventory]]) -> list[tuple[str, NodeInventory]]:
    """The node's GPU inventories and, where it has shards, its shards as one more ("shard",
    partitioning "shard", ``units_per_gpu`` shards a GPU); each counting the other's use."""
    per_gpu = shards_per_gpu(node)
    if not per_gpu or not whole:
        return whole
    used = shards_used(node)
    touched = -(-used // per_gpu)  # the fewest GPUs that hold the shards in use
    held_whole = sum(inv.gpus_allocated for _, inv in whole)
    allocatable = sum(inv.gpus_allocatable for _, inv in whole)
    first = whole[0][1]
    shards = replace(
        first,
        gpus_total=_shard_count(node.gres),
        gpus_allocatable=allocatable * per_gpu,
        gpus_allocated=min(allocatable * per_gpu, used + held_whole * per_gpu),
        partitioning=SHARD,
        units_per_gpu=per_gpu,
    )
    if len(whole) == 1:  # one GPU type: the GPUs under shards are those of the node
        gtype, inv = whole[0]
        whole = [(gtype, replace(inv, gpus_allocated=min(inv.gpus_allocatable, inv.gpus_allocated + touched)))]
    return [*whole, (SHARD, shards)]


class ShardRatios:
    """Shards a GPU of a job's nodes, read from slurmctld once, when a job of shards is met:
    sacct records the shards a job held, not how many make a GPU.  ``nodes`` None: no
    slurmctld to ask (sacct lines read from a file)."""

    def __init__(self, nodes: Callable[[], Iterable[SlurmNode]] | None):
        self._nodes = nodes
        self._ratios: dict[str, int] | None = None

    def __call__(self, job_nodes: Iterable[str]) -> int:
        """The shards a GPU of the job's nodes holds; 0 where no node of the cluster has
        shards to tell (the job is then not charged: a shard is never a whole GPU)."""
        if self._ratios is None:
            self._ratios = {n.name: r for n in self._nodes() if (r := shards_per_gpu(n))} if self._nodes else {}
        found = [self._ratios[n] for n in job_nodes if n in self._ratios]
        if found:
            return min(found)
        # its nodes have no shards now (reconfigured since): the cluster's split
        return max(self._ratios.values(), default=0)

    def of(self, job: SlurmAcct, cluster: str) -> int:
        """What the job's units are divided by: 1 for GPUs, the shards a GPU holds for shards,
        0 (logged) for shards no node tells the split of."""
        if parsers.tres_gpus(job.alloc_tres):
            return 1
        ratio = self(job.nodes)
        if not ratio:
            log.warning("slurm %s: job %s held shards, and no node says how many make a GPU", cluster, job.job_id)
        return ratio
