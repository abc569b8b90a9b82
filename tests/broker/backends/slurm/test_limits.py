"""Slurm's QoS, association and partition limits read into LocalLimits: from captured
outputs of the test cluster, and (marker slurm) from the running cluster itself."""
from __future__ import annotations

import pathlib

import pytest

from broker.local_limits import GroupQuota, JobCap
from broker.backends.slurm import CommandTransport, SlurmBackend
from broker.backends.slurm import limits as sl
from broker.backends.slurm.transport import SlurmJob

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


def _read(version: str, name: str) -> str:
    return (FIXTURES / version / name).read_text()


@pytest.mark.parametrize("version", ["22.05"])
def test_captured_qos_association_and_partition_limits_become_local_limits(version):
    qos = sl.parse_qos(_read(version, "sacctmgr-show-qos.txt"))
    assocs = sl.parse_associations(_read(version, "sacctmgr-show-assoc.txt"))
    parts = sl.parse_partitions(_read(version, "scontrol-show-partition.txt"))
    assert [q.name for q in qos] == ["normal", "gpu-small"] and qos[1].max_gpus == 2
    assert assocs == [sl.Row("research", grp_gpus=4)]
    assert {p.name: p.max_time_s for p in parts} == {"gpu": None, "debug": 3600.0}
    running = [SlurmJob("7", "x", "RUNNING", account="research", qos="normal", tres={"gres/gpu": "3"})]
    limits = sl.local_limits(qos, assocs, parts, running)
    assert JobCap("partition debug", pool="debug", max_time_s=3600.0) in limits.caps
    assert JobCap("QoS gpu-small (MaxTRESPerJob=gres/gpu=2)", scope="qos:gpu-small", max_gpus=2) in limits.caps
    assert limits.quotas == (GroupQuota("association research (GrpTRES=gres/gpu=4)", scope="research",
                                        limit_gpus=4, used_gpus=3, running_jobs=1),)
    assert [c.source for c in limits.caps_for("debug/a100")] == ["partition debug"]
    assert limits.quotas_for("gpu/a100", ["research"])[0].headroom_gpus == 1


def test_partition_qos_caps_every_job_in_that_partition():
    parts = sl.parse_partitions("PartitionName=small MaxNodes=1 MaxTime=2-00:00:00 QoS=gpu-small State=UP\n")
    limits = sl.local_limits([sl.Row("gpu-small", max_gpus=2)], [], parts, [])
    assert JobCap("QoS gpu-small of partition small (MaxTRESPerJob=gres/gpu=2)", pool="small",
                  max_gpus=2) in limits.caps
    assert JobCap("partition small", pool="small", max_nodes=1, max_time_s=172800.0) in limits.caps


def test_slurm_durations():
    assert [sl.slurm_duration_s(t) for t in ("01:00:00", "1-02", "30", "5:30", "UNLIMITED")] == [
        3600.0, 93600.0, 1800.0, 330.0, None]


def test_limit_commands_are_argument_lists_through_the_bounded_runner():
    asked = []

    class Recording(CommandTransport):
        def query(self, cmd, *, empty_ok=()):
            asked.append(list(cmd))
            return ""

    sl.read_limits(Recording(timeout_s=5), [])
    assert asked == [sl.QOS_CMD, sl.ASSOC_CMD, sl.PARTITION_CMD]
    assert all(isinstance(a, str) for cmd in asked for a in cmd)


@pytest.mark.slurm
def test_real_cluster_reports_its_qos_association_and_partition_limits(slurm_env):
    backend = SlurmBackend("ci", CommandTransport(timeout_s=20, bin_dir=slurm_env.get("SLURM_BIN_DIR", "")))
    limits = backend.inventory().limits
    caps = {c.source: c for c in limits.caps}
    assert caps["QoS gpu-small (MaxTRESPerJob=gres/gpu=2)"].max_gpus == 2
    assert caps["partition debug"].max_time_s == 3600.0
    research = [q for q in limits.quotas if q.scope == "research"]
    assert research and research[0].limit_gpus == 4
