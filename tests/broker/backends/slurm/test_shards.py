"""Slurm's GPU shares (gres/shard): a node's shards are a pool of their own whose unit is a
share of a GPU; a job of shares asks --gres=shard:N and is charged its shares' part of a GPU."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from broker.backends.base import ProjectIdentity
from broker.backends.slurm import SlurmBackend, SlurmConfig, parsers
from broker.backends.slurm.mapping import build_request, sbatch_args
from broker.backends.slurm.transport import SlurmAcct
from broker.spec import WorkloadSpec

from .test_backend import ReplayTransport

SHARED_NODE = (
    # as 22.05 prints it: GresUsed counts the GPUs a job's shards are on, AllocTRES the shards
    "NodeName=s1 Gres=gpu:a100:8,shard:a100:32 GresUsed=gpu:a100:2(IDX:0-1),shard:a100:2(IDX:2-3) "
    "AllocTRES=cpu=3,mem=1G,gres/gpu=2,gres/shard=6 State=MIXED Partitions=shard\n"
)


def _backend(nodes: str = SHARED_NODE) -> tuple[SlurmBackend, ReplayTransport]:
    transport = ReplayTransport(acct_text="")
    transport._nodes = parsers.parse_scontrol_nodes(nodes)
    return SlurmBackend("ci", transport, SlurmConfig(throughput_window_s=0)), transport


def test_a_nodes_shards_are_a_pool_of_their_own_each_counting_what_the_other_holds():
    backend, _ = _backend()
    pools = {p.name: p for p in backend.inventory().pools}
    assert set(pools) == {"shard/a100", "shard/shard"}
    whole, shards = pools["shard/a100"].nodes[0], pools["shard/shard"].nodes[0]
    assert (shards.partitioning, shards.units_per_gpu, shards.gpus_total) == ("shard", 4, 32)
    # 6 shards in use, and 2 GPUs held whole (8 shards' worth)
    assert shards.gpus_allocated == 6 + 2 * 4 and shards.gpus_free == 32 - 14
    # the 6 shards sit on at least 2 GPUs, which no whole-GPU job can have
    assert (whole.partitioning, whole.gpus_allocated, whole.gpus_free) == ("whole", 4, 4)
    assert pools["shard/shard"].units_per_gpu == 4 and pools["shard/a100"].units_per_gpu == 1


def test_a_job_of_shares_asks_gres_shard_in_the_shard_partition():
    spec = WorkloadSpec(project="p", name="infer", command="serve", gpu_models=("a100",), gpus_per_worker=2,
                        gpu_share=True)
    config = SlurmConfig(partition_by_gpu_type={"shard": "shard", "a100": "gpu"})
    identity = ProjectIdentity(tenant="t", project="p", slurm_account="research")
    request = build_request(spec, "wl-s", identity, config, {"a100"})
    assert request.gres == "shard:2" and request.partition == "shard"
    assert "--gres=shard:2" in sbatch_args(request)


def _acct(job_id: str, tres: str, nodes: tuple[str, ...], elapsed: int) -> SlurmAcct:
    start = datetime.now(timezone.utc) - timedelta(hours=1)
    return SlurmAcct(job_id=job_id, name="wl-s", account="research", partition="shard", state="COMPLETED",
                     alloc_tres=parsers.parse_tres(tres), elapsed_s=elapsed, started_at=start,
                     ended_at=start + timedelta(seconds=elapsed), nodes=nodes)


def test_a_job_of_shares_is_charged_its_share_of_a_gpu_not_whole_gpus():
    backend, transport = _backend()
    transport._acct = [
        _acct("1", "billing=1,cpu=1,gres/shard=2,mem=1G,node=1", ("s1",), 600),  # 2 of 4 a GPU
        _acct("2", "billing=1,cpu=1,gres/gpu:a100=1,gres/gpu=1,mem=1G,node=1", ("s1",), 600),
        _acct("3", "billing=1,cpu=1,mem=1G,node=1", ("s1",), 600),  # AccountingStorageTRES without shards
    ]
    records = {r.job_id: r for r in backend.usage(datetime.now(timezone.utc) - timedelta(days=1))}
    assert set(records) == {"1", "2"}  # a share Slurm did not account is not charged at all
    assert (records["1"].gpus, records["1"].gpu_seconds) == (2, 2 * 600 // 4)
    assert (records["2"].gpus, records["2"].gpu_seconds) == (1, 600)


def test_a_share_on_a_node_no_longer_sharded_is_charged_at_the_clusters_split_never_a_whole_gpu():
    backend, transport = _backend(SHARED_NODE + "NodeName=n9 Gres=gpu:a100:8 State=IDLE Partitions=gpu\n")
    transport._acct = [_acct("1", "cpu=1,gres/shard=4,node=1", ("gone",), 100)]
    [record] = backend.usage(datetime.now(timezone.utc) - timedelta(days=1))
    assert record.gpu_seconds == 4 * 100 // 4


def test_a_share_no_node_tells_the_split_of_is_not_charged_at_all(caplog):
    backend, transport = _backend("NodeName=n9 Gres=gpu:a100:8 State=IDLE Partitions=gpu\n")
    transport._acct = [_acct("1", "cpu=1,gres/shard=4,node=1", ("gone",), 100)]
    assert list(backend.usage(datetime.now(timezone.utc) - timedelta(days=1))) == []
    assert "job 1 held shards, and no node says how many make a GPU" in caplog.text
