"""Parsers against real Slurm 22.05 output (fixtures/) and edge cases of the formats."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from broker.backends.base import JobState, Reason
from broker.backends.slurm import parsers
from broker.backends.slurm import json_records
from broker.backends.slurm.transport import GresItem

from .support import read_fixture, read_json_fixture


def utc(ts: int) -> datetime:
    return datetime.fromtimestamp(ts, timezone.utc)


# ------------------------------------------------------------------ scalars

def test_parse_time_forms():
    assert parsers.parse_time("1795994156") == utc(1795994156)
    assert parsers.parse_time(1795994156) == utc(1795994156)
    assert parsers.parse_time({"set": True, "infinite": False, "number": 1795994156}) == utc(1795994156)
    for nothing in ("N/A", "Unknown", "None", "", None, 0, "0", {"set": False, "number": 0}):
        assert parsers.parse_time(nothing) is None
    iso = parsers.parse_time("2026-11-29T22:37:30")
    assert iso is not None and iso.tzinfo is not None
    assert iso == datetime(2026, 11, 29, 22, 37, 30).astimezone().astimezone(timezone.utc)


def test_number_forms():
    assert parsers.number("5") == 5
    assert parsers.number({"set": True, "number": 7}) == 7
    assert parsers.number({"set": False, "number": 7}, -1) == -1
    assert parsers.number({"set": True, "infinite": True, "number": 0}, -1) == -1
    assert parsers.number(None, 3) == 3
    assert parsers.number("N/A", 3) == 3


@pytest.mark.parametrize("text,hosts", [
    ("n1", ("n1",)),
    ("n[1-2]", ("n1", "n2")),
    ("n[1-3,5],x", ("n1", "n2", "n3", "n5", "x")),
    ("gpu[01-03]-ib", ("gpu01-ib", "gpu02-ib", "gpu03-ib")),
    ("r[1-2]n[1-2]", ("r1n1", "r1n2", "r2n1", "r2n2")),
    ("", ()), ("(null)", ()), ("None assigned", ()),
])
def test_expand_hostlist(text, hosts):
    assert parsers.expand_hostlist(text) == hosts


@pytest.mark.parametrize("text", ["n[a-b]", "n[1-x]", "n[0-99999999999]", "r[1-300]n[1-300]"])
def test_a_host_range_that_is_not_slurms_or_too_long_to_expand_is_kept_as_written(text):
    assert parsers.expand_hostlist(f"{text},gpu[1-2]") == (text, "gpu1", "gpu2")


def test_a_host_list_stops_expanding_once_it_names_more_hosts_than_any_cluster_has():
    hosts = parsers.expand_hostlist("a[1-60000],b[1-60000],c[1-2]")
    assert len(hosts) == 120_001 and hosts[-1] == "c[1-2]"


def test_parse_tres_and_gpu_counts():
    tres = parsers.parse_tres("billing=1,cpu=1,gres/gpu:a100=2,gres/gpu=2,mem=256M,node=1")
    assert tres["mem"] == "256M"
    assert parsers.tres_gpus(tres) == 2
    assert parsers.tres_gpu_types(tres) == {"a100": 2}
    assert parsers.tres_gpu_model(tres) == "a100"
    # only typed entries
    assert parsers.tres_gpus({"gres/gpu:a100": "2", "gres/gpu:h100": "3"}) == 5
    assert parsers.tres_gpu_model({"gres/gpu:a100": "2", "gres/gpu:h100": "3"}) == "h100"
    assert parsers.tres_gpus(parsers.parse_tres("")) == 0
    assert parsers.tres_gpus(parsers.parse_tres("cpu=4,mem=1G")) == 0


@pytest.mark.parametrize("text,items", [
    ("gpu:a100:8", [GresItem("gpu", "a100", 8)]),
    ("gpu:8", [GresItem("gpu", "", 8)]),
    ("gpu", [GresItem("gpu", "", 1)]),
    ("gpu:a100:4(S:0-1)", [GresItem("gpu", "a100", 4, "S:0-1")]),
    ("gpu:1g.10gb:7", [GresItem("gpu", "1g.10gb", 7)]),
    ("gpu:a100_3g.40gb:2(S:0),gpu:a100:2(S:1)",
     [GresItem("gpu", "a100_3g.40gb", 2, "S:0"), GresItem("gpu", "a100", 2, "S:1")]),
    ("gpu:a100:3(IDX:0,2-3),mps:200", [GresItem("gpu", "a100", 3, "IDX:0,2-3"), GresItem("mps", "", 200)]),
    ("gpu:a100:0(IDX:N/A)", [GresItem("gpu", "a100", 0, "IDX:N/A")]),
    ("gres:gpu:a100:2", [GresItem("gpu", "a100", 2)]),
    ("gres/gpu:A100:2", [GresItem("gpu", "a100", 2)]),
    ("(null)", []), ("N/A", []),
])
def test_parse_gres(text, items):
    assert list(parsers.parse_gres(text)) == items


# ------------------------------------------------------------------ states and reasons

@pytest.mark.parametrize("raw,state", [
    ("PENDING", JobState.PENDING), ("RUNNING", JobState.RUNNING), ("COMPLETING", JobState.RUNNING),
    ("COMPLETED", JobState.COMPLETED), ("CANCELLED by 0", JobState.CANCELLED),
    ("FAILED", JobState.FAILED), ("TIMEOUT", JobState.FAILED), ("NODE_FAIL", JobState.FAILED),
    ("OUT_OF_MEMORY", JobState.FAILED), (["PENDING", "REQUIRED"], JobState.PENDING),
    ("PD", JobState.PENDING), ("CA", JobState.CANCELLED), ("WEIRD", JobState.UNKNOWN), ("", JobState.UNKNOWN),
])
def test_map_job_state(raw, state):
    assert parsers.map_job_state(raw) is state


@pytest.mark.parametrize("raw,reason", [
    ("Resources", Reason.CAPACITY), ("Priority", Reason.CAPACITY),
    ("QOSMaxGRESPerJob", Reason.POLICY), ("QOSGrpGRES", Reason.POLICY),
    ("AssocGrpGRES", Reason.POLICY), ("AssocMaxJobsLimit", Reason.POLICY),
    ("AssocGrpGRESMinutes", Reason.POLICY), ("QOSMaxWallDurationPerJobLimit", Reason.POLICY),
    ("JobHeldUser", Reason.HELD), ("JobHeldAdmin", Reason.HELD),
    ("ReqNodeNotAvail", Reason.UNAVAILABLE), ("ReqNodeNotAvail, UnavailableNodes:n1", Reason.UNAVAILABLE),
    ("PartitionDown", Reason.UNAVAILABLE), ("PartitionInactive", Reason.UNAVAILABLE),
    ("Dependency", Reason.WAITING), ("BeginTime", Reason.WAITING),
    ("None", Reason.NONE), ("BadConstraints", Reason.OTHER), ("SomethingNew", Reason.OTHER),
])
def test_map_reason(raw, reason):
    assert parsers.map_reason(raw) is reason


def test_reason_only_while_pending():
    assert parsers.job_reason(JobState.RUNNING, "Resources") is Reason.NONE
    assert parsers.job_reason(JobState.FAILED, "BadConstraints") is Reason.NONE
    assert parsers.job_reason(JobState.PENDING, "Resources") is Reason.CAPACITY


@pytest.mark.parametrize("raw,base,flags,healthy,draining", [
    ("IDLE", "IDLE", set(), True, False),
    ("MIXED+DRAIN", "MIXED", {"DRAIN"}, True, True),
    ("IDLE+DRAIN", "IDLE", {"DRAIN"}, True, True),
    ("DOWN*", "DOWN", {"NOT_RESPONDING"}, False, False),
    ("DOWN+DRAIN+NOT_RESPONDING", "DOWN", {"DRAIN", "NOT_RESPONDING"}, False, True),
    ("IDLE+NOT_RESPONDING", "IDLE", {"NOT_RESPONDING"}, False, False),
    ("IDLE*", "IDLE", {"NOT_RESPONDING"}, False, False),
    ("ALLOCATED+COMPLETING", "ALLOCATED", {"COMPLETING"}, True, False),
    ("drained", "IDLE", {"DRAIN"}, True, True),
    ("draining", "ALLOCATED", {"DRAIN"}, True, True),
    ("idle~", "IDLE", {"POWERED_DOWN"}, False, False),
    ("MIXED+MAINT", "MIXED", {"MAINT"}, True, True),
    ("INVAL", "INVAL", {"INVALID"}, False, False),
    (["IDLE", "DRAIN"], "IDLE", {"DRAIN"}, True, True),      # v0.0.40+ JSON
    ("mixed", "MIXED", set(), True, False),                   # v0.0.38 JSON
])
def test_node_states(raw, base, flags, healthy, draining):
    b, f = parsers.split_node_state(raw)
    assert (b, set(f)) == (base, flags)
    from broker.backends.slurm.transport import SlurmNode
    assert parsers.node_health(SlurmNode(name="x", state=b, flags=f)) == (healthy, draining)


def test_workload_id_of():
    assert parsers.workload_id_of("wl-abc", "wl-abc") == "wl-abc"
    assert parsers.workload_id_of("anything", "wl-abc") == "wl-abc"
    assert parsers.workload_id_of("wl-abc", "") == "wl-abc"          # sacct before the job ended
    assert parsers.workload_id_of("ext-job-0002", "ext:0002") is None
    assert parsers.workload_id_of("wl-abc", "not ours") is None
    assert parsers.workload_id_of("wrap", "(null)") is None


# ------------------------------------------------------------------ scontrol show node

def test_scontrol_nodes_sample():
    nodes = parsers.parse_scontrol_nodes(read_fixture("scontrol-show-node.txt"))
    assert [n.name for n in nodes] == ["n1", "n2"]
    n1, n2 = nodes
    assert n1.state == "MIXED" and n1.flags == frozenset()
    assert n1.partitions == ("gpu", "debug")
    assert n1.gres == (GresItem("gpu", "a100", 8),)
    assert n1.gres_used is None  # not printed without --details
    assert parsers.tres_gpus(n1.alloc_tres) == 4
    assert parsers.tres_gpus(n1.cfg_tres) == 8
    assert n2.state == "IDLE" and parsers.tres_gpus(n2.alloc_tres) == 0


def test_scontrol_nodes_details_and_drain_reason():
    nodes = parsers.parse_scontrol_nodes(read_fixture("scontrol-show-node-d.txt"))
    n1, n2 = nodes
    assert n1.gres_used == (GresItem("gpu", "a100", 4, "IDX:0-3"),)
    assert n2.state == "MIXED" and n2.flags == {"DRAIN"}
    # free text with '=' inside stays in the reason
    assert n2.reason == "fixture drain: gpu=0 check [root@1795994159]"


def test_kv_line_multiword_values():
    kv = parsers.parse_kv_line("NodeName=a OS=Linux 6.1 #1 SMP  RealMemory=10 Reason=x y=z [root@1]")
    assert kv["OS"] == "Linux 6.1 #1 SMP"
    assert kv["RealMemory"] == "10"
    assert kv["Reason"] == "x y=z [root@1]"


def test_synthetic_mig_and_socket_node():
    line = ("NodeName=g1 Gres=gpu:a100:4(S:0-1),gpu:1g.10gb:7(S:1) GresDrain=N/A "
            "GresUsed=gpu:a100:2(IDX:0-1),gpu:1g.10gb:3(IDX:4-6) State=DOWN+DRAIN* "
            "Partitions=mig CfgTRES=gres/gpu=11 AllocTRES=gres/gpu=5")
    (node,) = parsers.parse_scontrol_nodes(line)
    assert node.gres == (GresItem("gpu", "a100", 4, "S:0-1"), GresItem("gpu", "1g.10gb", 7, "S:1"))
    assert node.gres_used[1] == GresItem("gpu", "1g.10gb", 3, "IDX:4-6")
    assert node.state == "DOWN" and node.flags == {"DRAIN", "NOT_RESPONDING"}
    assert parsers.node_health(node) == (False, True)


# ------------------------------------------------------------------ squeue

def test_squeue_our_format():
    jobs = {j.job_id: j for j in parsers.parse_squeue(read_fixture("squeue-O-us.txt"))}
    run = jobs["13"]
    assert (run.name, run.state, run.reason, run.comment) == ("wl-fix-run", "RUNNING", "None", "wl-fix-run")
    assert run.nodes == ("n1", "n2") and run.num_nodes == 2
    assert parsers.tres_gpus(run.tres) == 8
    assert run.started_at == utc(1795994156)
    assert (jobs["14"].state, jobs["14"].reason, jobs["14"].qos) == ("PENDING", "QOSMaxGRESPerJob", "gpu-small")
    assert parsers.tres_gpus(jobs["14"].tres) == 3
    assert jobs["14"].started_at is None
    assert jobs["15"].reason == "AssocGrpGRES"
    assert jobs["16"].reason == "Resources" and parsers.tres_gpus(jobs["16"].tres) == 16
    # a foreign job whose name holds the old delimiter '|'
    assert jobs["17"].name == "ext|job with pipe" and jobs["17"].reason == "JobHeldUser"
    assert parsers.workload_id_of(jobs["17"].name, jobs["17"].comment) is None
    assert jobs["10"].state == "CANCELLED"


def test_squeue_sample_percent_format():
    """The FACTS sample used -o '%i|%j|%u|%a|%P|%T|%r|%b|%D|%N|%k|%M|%l|%V|%S': only
    tres_per_node is known there, so GPUs = per node x nodes."""
    fields = ("JobID", "Name", "User", "Account", "Partition", "State", "Reason", "tres-per-node",
              "NumNodes", "NodeList", "Comment", "Time", "TimeLimit", "SubmitTime", "StartTime")
    jobs = {j.job_id: j for j in parsers.parse_squeue(read_fixture("squeue-format.txt"), fields, "|")}
    assert parsers.tres_gpus(jobs["8"].tres) == 16
    assert parsers.tres_gpu_types(jobs["8"].tres) == {"a100": 16}
    assert parsers.map_reason(jobs["8"].reason) is Reason.CAPACITY
    assert parsers.map_reason(jobs["5"].reason) is Reason.POLICY
    assert parsers.map_reason(jobs["7"].reason) is Reason.POLICY
    assert jobs["3"].nodes == ("n1", "n2") and parsers.tres_gpus(jobs["3"].tres) == 2
    assert jobs["2"].comment == "ext:0002" and jobs["3"].comment == ""


# ------------------------------------------------------------------ sacct

def test_sacct_our_format():
    recs = {r.job_id: r for r in parsers.iter_sacct(read_fixture("sacct-us.txt").splitlines())}
    m = recs["9"]
    assert (m.name, m.account, m.state, m.comment) == ("wl-m", "general", "COMPLETED", "wl-m")
    assert parsers.tres_gpus(m.alloc_tres) == 6 and m.elapsed_s == 5
    assert m.nodes == ("n1", "n2")
    assert m.started_at == utc(1795993822) and m.ended_at == utc(1795993827)
    assert recs["10"].state == "CANCELLED"          # "CANCELLED by 0"
    assert recs["2"].started_at is None and recs["2"].nodes == ()   # "None assigned"
    assert parsers.tres_gpus(recs["2"].req_tres) == 3 and not recs["2"].alloc_tres


def test_sacct_live_jobs_have_no_comment_yet():
    """slurmdbd stores the job comment only when the job ends: find() falls back to the
    job name for pending and running jobs."""
    run, pend = parsers.iter_sacct(read_fixture("sacct-us-live.txt").splitlines())
    assert (run.state, run.comment, run.ended_at, run.nodes) == ("RUNNING", "", None, ("n1", "n2"))
    assert parsers.tres_gpus(run.alloc_tres) == 4
    assert parsers.workload_id_of(run.name, run.comment) == "wl-live-run"
    assert (pend.state, pend.started_at, pend.alloc_tres) == ("PENDING", None, {})
    assert parsers.tres_gpus(pend.req_tres) == 3


def test_sacct_sample_with_header():
    recs = {r.job_id: r for r in parsers.parse_sacct_table(read_fixture("sacct-P-X.txt"))}
    assert len(recs) == 9
    assert parsers.tres_gpus(recs["6"].alloc_tres) == 4 and recs["6"].elapsed_s == 30
    assert recs["5"].state == "CANCELLED" and recs["5"].started_at is None
    assert recs["9"].comment == "ext:rest1"
    assert recs["3"].comment == ""


def test_sacct_bad_lines_are_skipped():
    lines = ["", "1\x1fonly-two-fields", read_fixture("sacct-us.txt").splitlines()[0]]
    assert len(list(parsers.iter_sacct(lines))) == 1


# ------------------------------------------------------------------ JSON (REST v0.0.38, --json)

def test_jobs_json_sample():
    for name in ("squeue.json", "rest-jobs.json"):
        jobs = {j.job_id: j for j in map(json_records.job_from_json, read_json_fixture(name)["jobs"])}
        assert jobs["3"].nodes == ("n1", "n2") and parsers.tres_gpus(jobs["3"].tres) == 2
        assert jobs["5"].state == "PENDING" and jobs["5"].reason == "QOSMaxGRESPerJob"
        assert parsers.tres_gpus(jobs["5"].tres) == 3       # from tres_req_str
        assert jobs["7"].reason == "AssocGrpGRES"
        assert jobs["4"].state == "FAILED" and jobs["4"].reason == "BadConstraints"
        assert jobs["1"].comment == "extid=abc123"
        assert jobs["1"].started_at is not None and jobs["1"].ended_at is not None


def test_nodes_json_sample():
    nodes = [json_records.node_from_json(n) for n in read_json_fixture("sinfo.json")["nodes"]]
    n1, n2 = nodes
    assert n1.state == "MIXED" and n1.gres_used == (GresItem("gpu", "a100", 4, "IDX:3-6"),)
    assert n2.state == "IDLE" and n2.gres_used == (GresItem("gpu", "a100", 0, "IDX:N/A"),)
    assert n1.partitions == ("gpu", "debug")


def test_acct_json_sample():
    for name in ("sacct.json", "rest-slurmdb-jobs.json"):
        recs = {r.job_id: r for r in map(json_records.acct_from_json, read_json_fixture(name)["jobs"])}
        assert parsers.tres_gpus(recs["6"].alloc_tres) == 4 and recs["6"].elapsed_s > 0
        assert parsers.tres_gpu_model(recs["1"].alloc_tres) == "a100"
        assert recs["1"].comment == "extid=abc123"
        assert recs["8"].state == "CANCELLED"
        assert recs["3"].nodes == ("n1", "n2")


def test_json_v0040_shapes():
    """23.02+ shapes: state lists, {set, number} numbers."""
    job = json_records.job_from_json({
        "job_id": 42, "name": "wl-x", "job_state": ["PENDING"], "state_reason": "Priority",
        "comment": "wl-x", "tres_req_str": "cpu=1,gres/gpu=2", "tres_alloc_str": "",
        "node_count": {"set": True, "infinite": False, "number": 1}, "nodes": "",
        "submit_time": {"set": True, "infinite": False, "number": 1795994156},
        "start_time": {"set": True, "infinite": False, "number": 0}})
    assert (job.job_id, job.state, parsers.tres_gpus(job.tres), job.num_nodes) == ("42", "PENDING", 2, 1)
    assert job.submitted_at == utc(1795994156) and job.started_at is None
    node = json_records.node_from_json({"name": "n1", "state": ["IDLE", "DRAIN"], "gres": "gpu:h100:4",
                                   "gres_used": "gpu:h100:1(IDX:0)", "partitions": ["p"]})
    assert node.state == "IDLE" and node.flags == {"DRAIN"}
    rec = json_records.acct_from_json({"job_id": 42, "name": "wl-x", "state": {"current": ["COMPLETED"]},
                                  "time": {"elapsed": 10, "start": 1795994156, "end": 1795994166},
                                  "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": 2}]},
                                  "comment": {"job": "wl-x"}})
    assert (rec.state, rec.elapsed_s, parsers.tres_gpus(rec.alloc_tres), rec.comment) == ("COMPLETED", 10, 2, "wl-x")


# ------------------------------------------------------------------ errors

@pytest.mark.parametrize("text,transient", [
    ("sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)", True),
    ("sbatch: error: Batch job submission failed: Socket timed out on send/recv operation", True),
    ("sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified", False),
    ("sbatch: error: Batch job submission failed: Requested node configuration is not available", False),
    ("sbatch: error: Batch job submission failed: Invalid qos specification", False),
    ("sbatch: error: invalid partition specified: nosuch\nsbatch: error: Batch job submission failed: "
     "Invalid partition name specified", False),
])
def test_submit_error_classification(text, transient):
    assert parsers.is_transient(text) is transient


def test_slurm_error_message():
    text = ("sbatch: error: invalid partition specified: nosuch\n"
            "sbatch: error: Batch job submission failed: Invalid partition name specified")
    assert parsers.slurm_error_message(text) == "Invalid partition name specified"
    assert parsers.slurm_error_message("sbatch: error: Invalid --time specification") == "Invalid --time specification"


def test_rest_errors():
    payload = {"errors": [{"error_code": 2045, "error": "Invalid account or account/partition combination specified"}]}
    [(code, text)] = parsers.rest_errors(payload)
    assert parsers.rest_error_is_rejection(code, text)
    assert not parsers.rest_error_is_rejection(-1, "Unspecified error")
    assert not parsers.rest_error_is_rejection(1007, "Protocol authentication error")
    assert parsers.rest_error_is_rejection(9001, "Failure during parsing")
    assert parsers.rest_errors({"errors": [{"error_number": 9003, "error": "Nothing found with query"}]}) == [
        (9003, "Nothing found with query")]
    assert read_json_fixture("rest-submit.json")["job_id"] == 9
