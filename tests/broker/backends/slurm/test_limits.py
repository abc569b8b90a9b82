"""Slurm's QoS, association and partition limits read into LocalLimits: from captured
outputs of the test cluster, and (marker slurm) from the running cluster itself."""
from __future__ import annotations

import json
import pathlib

import pytest

from broker.backends.json_fields import BadField
from broker.local_limits import GroupQuota, JobCap, LocalLimits
from broker.backends.slurm import CommandTransport, SlurmBackend
from broker.backends.slurm import limits as sl
from broker.backends.slurm import limits_json
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
    assert asked == [sl.CONFIG_CMD, sl.QOS_CMD, sl.ASSOC_CMD, sl.PARTITION_CMD]
    assert all(isinstance(a, str) for cmd in asked for a in cmd)


MULTIFACTOR = "PriorityType            = priority/multifactor\nPriorityWeightFairShare = 100000\n"
SSHARE = """root|||
 root|root|0.000000
 fs-heavy||
  fs-heavy|root|0.013514
 fs-light||
  fs-light|gpb-alice|0.500000
  fs-light|root|1.000000
"""


def test_fair_share_is_read_per_account_when_the_cluster_weighs_it():
    class Answering(CommandTransport):
        def query(self, cmd, *, empty_ok=()):
            return {tuple(sl.CONFIG_CMD): MULTIFACTOR, tuple(sl.SHARE_CMD): SSHARE}.get(tuple(cmd), "")

    limits = sl.read_limits(Answering(timeout_s=5), [])
    assert limits.share_points() == {"fs-heavy": pytest.approx(1351.4), "fs-light": 100000.0, "root": 0.0}
    assert "PriorityWeightFairshare=100000" in limits.shares[0].source


def test_fair_share_is_not_read_when_the_cluster_orders_by_submission():
    asked = []

    class Basic(CommandTransport):
        def query(self, cmd, *, empty_ok=()):
            asked.append(list(cmd))
            return "PriorityType = priority/basic\n" if cmd == sl.CONFIG_CMD else ""

    assert sl.read_limits(Basic(timeout_s=5), []).shares == ()
    assert sl.SHARE_CMD not in asked
    assert sl.fairshare_weight("PriorityType = priority/multifactor\nPriorityWeightFairShare = 0\n") == 0


def test_fair_shares_round_trip_with_the_snapshot_and_old_snapshots_have_none():
    limits = sl.local_limits([], [], [], [], shares=sl.parse_shares(SSHARE, 10))
    assert LocalLimits.from_json(limits.to_json()) == limits
    assert LocalLimits.from_json({"caps": [], "quotas": []}).shares == ()


@pytest.mark.slurm
def test_real_cluster_reports_its_qos_association_and_partition_limits(slurm_env):
    backend = SlurmBackend("ci", CommandTransport(timeout_s=20, bin_dir=slurm_env.get("SLURM_BIN_DIR", "")))
    limits = backend.inventory().limits
    caps = {c.source: c for c in limits.caps}
    assert caps["QoS gpu-small (MaxTRESPerJob=gres/gpu=2)"].max_gpus == 2
    assert caps["partition debug"].max_time_s == 3600.0
    research = [q for q in limits.quotas if q.scope == "research"]
    assert research and research[0].limit_gpus == 4
    # the calibration's partition limit (scripts/slurm-cluster: calib MaxTime=10)
    assert caps["partition calib"].max_time_s == 600.0
    # the default profile weighs no fair share: jobs in submission order, and none is read
    assert limits.shares == ()


def _profile(name: str) -> None:
    import subprocess

    script = pathlib.Path(__file__).resolve().parents[4] / "scripts" / "slurm-cluster"
    subprocess.run(["bash", str(script), "profile", name], check=True, capture_output=True, timeout=120)


@pytest.mark.slurm
def test_real_cluster_in_the_fairshare_profile_reports_each_accounts_fair_share(slurm_env):
    backend = SlurmBackend("ci", CommandTransport(timeout_s=20, bin_dir=slurm_env.get("SLURM_BIN_DIR", "")))
    _profile("fairshare")
    try:
        shares = backend.inventory().limits.share_points()
    finally:
        _profile("default")
    assert {"fs-heavy", "fs-light", "general", "research"} <= set(shares)
    assert all(0.0 <= points <= 100000.0 for points in shares.values())
    assert backend.inventory().limits.shares == ()  # back in the default profile


# --- over REST: the same limits from slurmrestd's replies (limits_json) ---------------------

REST_SAMPLES = sorted((FIXTURES).glob("*/rest-v0.0.*-qos.json"))


def _rest_rows(qos_file: pathlib.Path):
    stem = qos_file.name.removesuffix("-qos.json")
    def read(kind):
        return json.loads((qos_file.parent / f"{stem}-{kind}.json").read_text())

    return (limits_json.qos_rows(read("qos")), limits_json.association_rows(read("associations")),
            limits_json.partition_rows(read("partitions")))


def test_every_version_ci_runs_has_captured_limit_replies():
    assert {p.parent.name for p in REST_SAMPLES} == {"22.05", "24.11", "26.05"}


@pytest.mark.parametrize("qos_file", REST_SAMPLES, ids=lambda p: f"{p.parent.name}-{p.name[5:12]}")
def test_captured_rest_replies_give_the_test_clusters_limits(qos_file):
    qos, assocs, parts = _rest_rows(qos_file)
    by_qos = {q.name: q for q in qos}
    assert by_qos["gpu-small"].max_gpus == 2 and by_qos["normal"].max_gpus is None
    assert sl.Row("research", grp_gpus=4) in assocs
    times = {p.name: p.max_time_s for p in parts}
    assert times["debug"] == 3600.0 and times["gpu"] is None
    limits = sl.local_limits(qos, assocs, parts, [])
    assert JobCap("QoS gpu-small (MaxTRESPerJob=gres/gpu=2)", scope="qos:gpu-small", max_gpus=2) in limits.caps


def test_rest_limit_rows_name_a_field_of_the_wrong_type():
    with pytest.raises(BadField, match=r"qos\[0\]\.limits"):
        limits_json.qos_rows({"qos": [{"name": "normal", "limits": 7}]})
    assert limits_json.partition_rows({"partitions": [{"name": "p", "maximums": {
        "time": {"set": True, "infinite": True, "number": 0}, "nodes": 4294967295}}]}) == [sl.PartitionRow("p")]


@pytest.mark.slurm
def test_real_cluster_over_rest_reports_the_limits_its_commands_do(slurm_env):
    from tests.broker.backends.slurm.test_integration import make_transport

    by_cli = SlurmBackend("ci", CommandTransport(timeout_s=20, bin_dir=slurm_env.get("SLURM_BIN_DIR", "")))
    by_rest = SlurmBackend("ci", make_transport("rest", slurm_env))
    cli, rest = by_cli.inventory().limits, by_rest.inventory().limits
    assert sorted(rest.caps, key=repr) == sorted(cli.caps, key=repr)
    assert sorted(rest.quotas, key=repr) == sorted(cli.quotas, key=repr)
    assert "QoS gpu-small (MaxTRESPerJob=gres/gpu=2)" in {c.source for c in rest.caps}
