"""The parsers on each tested Slurm version's real outputs (fixtures/<version>/, captured
by capture_samples.sh from the test cluster), in strict mode: every field of every
sample is known.  The same jobs were submitted on each version:

- wl-capture-done: 2 GPUs on one node, completed, comment = workload id
- ext-capture-cancel: begin time in an hour, cancelled while pending
- wl-capture-run: 2 nodes x 3 GPUs, running (sleep 60)
- wl-capture-qos: 3 GPUs on QoS gpu-small (MaxTRESPerJob gres/gpu=2): pending
- ext-capture-held: submitted held
"""
from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from broker.backends.base import JobState, Reason
from broker.backends.slurm import SlurmBackend, SlurmConfig, Transport, json_records, parsers
from broker.backends.slurm.transport import GresItem

from .support import FIXTURES

VERSIONS = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir() and p.name[:1].isdigit())


def test_both_tested_versions_have_samples():
    assert {"22.05", "24.11", "26.05"} <= set(VERSIONS)


def sample(version: str, name: str) -> str:
    return (FIXTURES / version / name).read_text()


def sample_json(version: str, name: str) -> dict:
    return json.loads(sample(version, name))


def rest_files(version: str, kind: str) -> list[str]:
    """rest-v0.0.N-<kind>.json of every API version the server offered."""
    apis = sample(version, "rest-api-versions.txt").split()
    assert apis, "the capture found no REST API version"
    return [f"rest-{api}-{kind}.json" for api in apis]


def latest(records, name: str):
    """The newest record of the job called ``name`` (a capture may have run twice)."""
    found = [r for r in records if r.name == name]
    assert found, f"no job {name}"
    return max(found, key=lambda r: int(r.job_id))


def check_jobs(jobs) -> None:
    run = latest(jobs, "wl-capture-run")
    assert (run.state, run.comment, run.nodes, run.num_nodes) == ("RUNNING", "wl-capture-run", ("n1", "n2"), 2)
    assert parsers.tres_gpus(run.tres) == 6 and parsers.tres_gpu_model(run.tres) == "a100"
    assert run.started_at is not None
    qos = latest(jobs, "wl-capture-qos")
    assert (qos.state, qos.reason, qos.qos, qos.account) == ("PENDING", "QOSMaxGRESPerJob", "gpu-small", "research")
    assert parsers.job_reason(parsers.map_job_state(qos.state), qos.reason) is Reason.POLICY
    assert parsers.tres_gpus(qos.tres) == 3
    held = latest(jobs, "ext-capture-held")
    assert parsers.map_reason(held.reason) is Reason.HELD
    assert parsers.workload_id_of(held.name, held.comment) is None
    assert parsers.map_job_state(latest(jobs, "ext-capture-cancel").state) is JobState.CANCELLED
    done = latest(jobs, "wl-capture-done")
    assert parsers.map_job_state(done.state) is JobState.COMPLETED and parsers.tres_gpus(done.tres) == 2


def check_nodes(nodes, details: bool = True) -> None:
    by_name = {n.name: n for n in nodes}
    assert sorted(by_name) == ["n1", "n2"]
    for node in by_name.values():
        assert node.gres == (GresItem("gpu", "a100", 8),)
        # the calib partition (the simulator's calibration) came after 22.05's and 24.11's captures
        assert node.partitions in (("gpu", "debug"), ("gpu", "debug", "calib")) and node.state == "MIXED"
        assert parsers.node_health(node) == (True, False)
        assert parsers.tres_gpus(node.cfg_tres) == 8
        assert parsers.tres_gpus(node.alloc_tres) == 3      # wl-capture-run: 3 per node
        if details:
            assert [(g.type, g.count) for g in node.gres_used] == [("a100", 3)]


def check_accounting(recs) -> None:
    done = latest(recs, "wl-capture-done")
    assert (done.state, done.comment, done.account, done.nodes) == ("COMPLETED", "wl-capture-done", "general", ("n1",))
    assert parsers.tres_gpus(done.alloc_tres) == 2 and done.ended_at >= done.started_at
    run = latest(recs, "wl-capture-run")
    assert (run.state, run.ended_at, run.nodes) == ("RUNNING", None, ("n1", "n2"))
    assert parsers.tres_gpus(run.alloc_tres) == 6
    assert parsers.workload_id_of(run.name, run.comment) == "wl-capture-run"
    qos = latest(recs, "wl-capture-qos")
    assert (qos.state, qos.started_at, dict(qos.alloc_tres)) == ("PENDING", None, {})
    assert parsers.tres_gpus(qos.req_tres) == 3


@pytest.fixture(params=VERSIONS)
def version(request) -> str:
    return request.param


def test_version_file_names_the_version(version):
    assert sample(version, "version.txt").startswith(version + ".")


def test_scontrol_nodes(version):
    check_nodes(parsers.parse_scontrol_nodes(sample(version, "scontrol-show-node-d.txt")))
    plain = parsers.parse_scontrol_nodes(sample(version, "scontrol-show-node.txt"))
    check_nodes(plain, details=False)
    assert all(n.gres_used is None for n in plain)


def test_squeue_our_format(version):
    check_jobs(parsers.parse_squeue(sample(version, "squeue-O-us.txt")))


def test_squeue_json(version):
    check_jobs([json_records.job_from_json(j) for j in sample_json(version, "squeue.json")["jobs"]])


def test_rest_jobs_of_every_api_version(version):
    for name in rest_files(version, "jobs"):
        check_jobs([json_records.job_from_json(j) for j in sample_json(version, name)["jobs"]])


def node_json_files(version: str) -> list[str]:
    """Node lists in JSON: REST /nodes of every API version; ``sinfo --json`` in 22.05 and
    ``scontrol --json show node`` from 23.02 on (24.11's sinfo --json summarises partitions
    and states instead, see test_sinfo_json_shape)."""
    names = [n for n in ("sinfo.json", "scontrol-show-node.json")
             if (FIXTURES / version / n).exists() and "nodes" in sample_json(version, n)]
    return names + rest_files(version, "nodes")


def test_node_json_of_every_source(version):
    names = node_json_files(version)
    assert len(names) >= 2
    for name in names:
        check_nodes([json_records.node_from_json(n) for n in sample_json(version, name)["nodes"]])


def test_sinfo_json_shape(version):
    """22.05: one entry per node; 24.11: ``sinfo`` entries per partition and state, with no
    per-node GRES use, so the backend never reads sinfo --json."""
    doc = sample_json(version, "sinfo.json")
    if version == "22.05":
        assert [n["name"] for n in doc["nodes"]] == ["n1", "n2"]
    else:
        assert "nodes" not in doc and doc["sinfo"]
        assert {"n1", "n2"} <= {n for entry in doc["sinfo"] for n in entry["nodes"]["nodes"]}


def test_sacct_our_format(version):
    check_accounting(list(parsers.iter_sacct(sample(version, "sacct-us.txt").splitlines())))


def test_sacct_with_header(version):
    recs = parsers.parse_sacct_table(sample(version, "sacct-P-X.txt"))
    done = latest(recs, "wl-capture-done")
    assert (done.state, done.comment) == ("COMPLETED", "wl-capture-done")
    assert parsers.tres_gpus(done.alloc_tres) == 2


def test_sacct_json_and_rest_slurmdb_jobs(version):
    for name in ["sacct.json", *rest_files(version, "slurmdb-jobs")]:
        check_accounting([json_records.acct_from_json(j) for j in sample_json(version, name)["jobs"]])


def test_no_sample_holds_a_token():
    for path in FIXTURES.rglob("*"):
        if path.is_file():
            assert "eyJhbGciOi" not in path.read_text(errors="replace"), path



class VersionReplay:
    """A stand-in transport (the seam a pyslurm transport would also plug into) that
    replays one version's captured outputs."""

    name = "replay"

    def __init__(self, version: str):
        self._nodes = parsers.parse_scontrol_nodes(sample(version, "scontrol-show-node-d.txt"))
        self._jobs = parsers.parse_squeue(sample(version, "squeue-O-us.txt"))
        self._acct = list(parsers.iter_sacct(sample(version, "sacct-us.txt").splitlines()))

    def nodes(self):
        return list(self._nodes)

    def topology(self):
        return {}

    def jobs(self, *, job_ids=None, names=None, states=None):
        return [j for j in self._jobs if (job_ids is None or j.job_id in job_ids)
                and (not names or j.name in names) and (not states or j.state in states)]

    def accounting(self, *, since=None, job_ids=None, names=None, every_run=False):
        return iter([r for r in self._acct if (job_ids is None or r.job_id in job_ids)
                     and (not names or r.name in names)])

    def submit(self, request):
        raise NotImplementedError("a replay does not submit")

    def cancel(self, job_id):
        raise NotImplementedError("a replay does not cancel")

    def associations(self, account):
        return []

    def add_account(self, account, users=(), *, cluster="", description="", organization=""):
        raise NotImplementedError("a replay has no accounts")


def test_backend_over_each_versions_outputs(version):
    transport = VersionReplay(version)
    assert isinstance(transport, Transport)
    backend = SlurmBackend("ci", transport, SlurmConfig(throughput_window_s=0))
    pools = {p.name: p for p in backend.inventory().pools}
    assert sorted(pools) in (["debug/a100", "gpu/a100"], ["calib/a100", "debug/a100", "gpu/a100"])
    assert (pools["gpu/a100"].gpus_total, pools["gpu/a100"].gpus_allocated) == (16, 6)
    run = latest(transport.jobs(), "wl-capture-run")
    status = backend.status([run.job_id])[run.job_id]
    assert (status.state, status.workload_id, status.gpus) == (JobState.RUNNING, "wl-capture-run", 6)
    usage = {r.workload_id: r for r in backend.usage(datetime(2020, 1, 1, tzinfo=timezone.utc))}
    assert usage["wl-capture-done"].gpus == 2 and usage["wl-capture-done"].end is not None
