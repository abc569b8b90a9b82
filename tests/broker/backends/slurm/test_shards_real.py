"""Slurm's GPU shares on the real cluster (``scripts/slurm-cluster profile shard``: node n4's 8
GPUs also split into 4 shards each, gres/shard, alone in partition shard). The broker reads the
shards as a pool of their own, a job of shares asks ``--gres=shard:2`` and runs there, slurmdbd
accounts its shards (AccountingStorageTRES lists gres/shard) and the broker charges it half a
GPU's hours, not two GPUs'. Placement sends a whole-GPU job to whole GPUs, never to the shards."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from broker.backends.base import JobState, PoolInventory
from broker.backends.slurm import CommandTransport, SlurmBackend, SlurmConfig
from tests.broker.backends.placement_probe import placement_among

from .support import JOBDIR, in_profile, sh
from .test_integration import GENERAL, new_wid, spec, wait_for, wait_state

pytestmark = pytest.mark.slurm


@pytest.fixture
def shards(slurm_env):
    with in_profile("shard") as ids:
        yield ids


def _pools(backend: SlurmBackend) -> dict[str, PoolInventory]:
    return {p.name: p for p in backend.inventory().pools if p.name.startswith("shard/")}


def test_a_job_of_shares_runs_on_the_shards_and_is_charged_its_share(shards):
    config = SlurmConfig(default_partition="gpu", partition_by_gpu_type={"shard": "shard"}, workdir=str(JOBDIR),
                         cancel_confirm_s=20.0)
    backend = SlurmBackend("ci", CommandTransport(timeout_s=30), config)
    pools = wait_for(lambda: (p := _pools(backend)) and "shard/shard" in p and p, "the shard pool reported", 40)
    shard_pool, whole_pool = pools["shard/shard"], pools["shard/a100"]
    assert (shard_pool.partitioning, shard_pool.units_per_gpu, shard_pool.gpus_total) == ("shard", 4, 32)
    assert whole_pool.partitioning == "whole" and whole_pool.gpus_total == 8

    # placement: shares go to the shards, whole GPUs to whole GPUs, each saying why not the other
    share = spec("sleep 6", gpus=2, gpu_share=True)
    chosen, left_out = placement_among({"shards": shard_pool, "whole": whole_pool}, share)
    assert chosen == "shards" and "the job asks for GPU shares" in left_out["whole"], left_out
    chosen, left_out = placement_among({"shards": shard_pool, "whole": whole_pool}, spec("sleep 6", gpus=2))
    assert chosen == "whole" and "offers shard GPUs, the job needs whole" in left_out["shards"], left_out

    # Slurm gives a job's node shards of one GPU: 6 of 4 a GPU would wait for ever
    chosen, left_out = placement_among({"shards": shard_pool}, spec("sleep 6", gpus=6, gpu_share=True))
    assert chosen == "" and "a worker asks 6, more than one GPU holds" in left_out["shards"], left_out

    since = datetime.now(timezone.utc) - timedelta(minutes=1)
    job_id = backend.submit(share, new_wid("share"), GENERAL)
    shards.append(job_id)
    shown = sh("scontrol", "show", "job", job_id)
    assert "Partition=shard" in shown and "shard:2" in shown, shown
    running = wait_state(backend, job_id, {JobState.RUNNING, JobState.COMPLETED})
    assert running.nodes == ("n4",) and running.gpus == 2
    done = wait_state(backend, job_id, {JobState.COMPLETED}, timeout=60)
    assert done.state == JobState.COMPLETED

    alloc = wait_for(lambda: sh("sacct", "-n", "-X", "-P", "-j", job_id, "-o", "AllocTRES").strip(), "sacct", 30)
    assert "gres/shard=2" in alloc and "gres/gpu" not in alloc, alloc
    record = wait_for(lambda: next((r for r in backend.usage(since) if r.job_id == job_id and r.end), None),
                      "the usage record", 30)
    elapsed = int(sh("sacct", "-n", "-X", "-P", "-j", job_id, "-o", "ElapsedRaw").strip())
    assert elapsed >= 6 and record.gpus == 2
    assert record.gpu_seconds == round(2 * elapsed / 4), (record.gpu_seconds, elapsed)  # half a GPU, not two
