"""Slurm's topology/tree on the real cluster (``scripts/slurm-cluster profile topology``: leaf
switch leaf-a holds n1 and n3, leaf-b holds n2, a spine above both; partition topo of the
three). With n3 busy, the free nodes sit under different leaves: a 2-node gang without a
topology level spans both (the control); one that requires a rack (``--switches=1``) waits,
then starts on n1 and n3, under one leaf, once n3 is free, as ``scontrol show job`` and
``sacct`` say. The broker's placement reads the same switches and says why it would wait."""
from __future__ import annotations

import time
from dataclasses import replace

import pytest

from broker.backends.base import JobState, PoolInventory
from broker.backends.slurm import CommandTransport, SlurmBackend, SlurmConfig
from tests.broker.backends.placement_probe import placement_of

from .support import JOBDIR, in_profile, sh
from .test_integration import GENERAL, new_wid, spec, wait_for, wait_state

pytestmark = pytest.mark.slurm
NODES = ("n1", "n2", "n3")


@pytest.fixture
def topology(slurm_env):
    with in_profile("topology") as ids:
        yield ids


def _pool(backend: SlurmBackend) -> PoolInventory:
    """The reported pool of the topo partition's nodes, with those nodes only."""
    [pool] = [p for p in backend.inventory().pools if any(n.name == "n3" for n in p.nodes)]
    return replace(pool, nodes=tuple(n for n in pool.nodes if n.name in NODES))


def _nodes_in_accounting(job_id: str) -> str:
    return sh("sacct", "-n", "-X", "-P", "-j", job_id, "-o", "NodeList").strip()


def test_a_gang_that_requires_a_rack_waits_for_one_leaf_switch_then_starts_under_it(topology):
    backend = SlurmBackend("ci", CommandTransport(timeout_s=30),
                           SlurmConfig(default_partition="topo", workdir=str(JOBDIR), cancel_confirm_s=20.0))
    levels = {n.name: n.topology for n in _pool(backend).nodes}
    assert levels["n3"] == (("switch level 1", "spine"), ("switch level 0", "leaf-a")), levels
    assert levels["n2"] == (("switch level 1", "spine"), ("switch level 0", "leaf-b")), levels

    blocker = sh("sbatch", "--parsable", "-p", "topo", "-w", "n3", "-N1", "--gres=gpu:8", "-t", "5",
                 "--wrap", "sleep 300").strip()
    topology.append(blocker)
    wait_for(lambda: "RUNNING" in sh("squeue", "-h", "-j", blocker, "-o", "%T"), "n3 taken", 40)

    # the control: without the level the gang takes n1 and n2, one under each leaf
    loose = backend.submit(spec("sleep 60", gpus=8, workers=2), new_wid("loose"), GENERAL)
    topology.append(loose)
    assert wait_state(backend, loose, {JobState.RUNNING}).nodes == ("n1", "n2")
    backend.cancel(loose)
    wait_state(backend, loose, {JobState.CANCELLED})

    gang = spec("sleep 5", gpus=8, workers=2, topology_level="rack")
    reason, _ = placement_of(_pool(backend), gang, one_worker_per_node=True)
    assert reason.startswith("topology: pool ") and (
        "1 of 2 workers of 8 GPUs fit in one rack (switch level 0) now (16 GPUs free, but split across nodes)"
    ) in reason, reason
    job_id = backend.submit(gang, new_wid("rack"), GENERAL)
    topology.append(job_id)
    assert "Switches=1@" in sh("scontrol", "show", "job", job_id)
    wait_state(backend, job_id, {JobState.PENDING})
    time.sleep(12)  # a scheduling cycle (10 s) and several backfill passes, with n1 and n2 free
    assert backend.status([job_id])[job_id].state is JobState.PENDING

    sh("scancel", blocker)
    running = wait_state(backend, job_id, {JobState.RUNNING, JobState.COMPLETED}, timeout=60)
    assert running.nodes == ("n1", "n3"), running
    assert wait_for(lambda: _nodes_in_accounting(job_id), "the job in accounting", 30) == "n[1,3]"
    # the broker's placement on the same nodes, idle again, takes the same leaf
    wait_state(backend, job_id, {JobState.COMPLETED}, timeout=60)
    assert placement_of(_pool(backend), gang, one_worker_per_node=True) == ("", ["n1", "n3"])
