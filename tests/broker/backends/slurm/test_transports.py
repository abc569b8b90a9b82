"""CommandTransport with stand-in Slurm commands, RestTransport with a stand-in HTTP session.

No Slurm needed: the stand-ins replay real 22.05 output and error text."""
from __future__ import annotations

import stat
import textwrap
from datetime import datetime, timedelta, timezone

import pytest
import requests

from broker.backends.base import ProjectIdentity, Rejected, Unavailable
from broker.backends.slurm import parsers
from broker.backends.slurm.commands import CommandTransport, since_arg
from broker.backends.slurm.config import SlurmConfig
from broker.backends.slurm.mapping import build_request
from broker.backends.slurm.rest import RestTransport, read_token
from broker.spec import WorkloadSpec

from .support import FIXTURES, read_json_fixture

SPEC = WorkloadSpec(project="p", name="n", command="echo 'a b'; sleep 1", gpu_models=("a100",))
IDENT = ProjectIdentity(tenant="t", project="p", slurm_account="general")


def fake_bin(tmp_path, name: str, body: str) -> None:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


# ------------------------------------------------------------------ argv building

def test_argv_local_ssh_and_sudo():
    assert CommandTransport().argv(["squeue", "-h"]) == ["squeue", "-h"]
    ssh = CommandTransport(prefix=["ssh", "-o", "BatchMode=yes", "login1"])
    assert ssh.remote_shell
    argv = ssh.argv(["sbatch", "--comment=wl-a b", "--wrap", "echo $HOME; rm x"])
    assert argv[:4] == ["ssh", "-o", "BatchMode=yes", "login1"]
    assert argv[4] == ("env SLURM_TIME_FORMAT=%s sbatch '--comment=wl-a b' --wrap "
                       "'echo $HOME; rm x'")
    sudo = CommandTransport(prefix=["sudo", "-u", "svc"])
    assert not sudo.remote_shell
    assert sudo.argv(["squeue", "a b"]) == ["sudo", "-u", "svc", "env", "SLURM_TIME_FORMAT=%s", "squeue", "a b"]
    assert CommandTransport(bin_dir="/opt/slurm/bin").argv(["sinfo"]) == ["/opt/slurm/bin/sinfo"]


def test_since_arg_is_relative():
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert since_arg(now - timedelta(hours=1), now) == "now-3601seconds"
    assert since_arg(now + timedelta(hours=1), now) == "now"
    assert since_arg(None) == "now-1days"


# ------------------------------------------------------------------ sbatch

def test_submit_passes_script_on_stdin(tmp_path):
    fake_bin(tmp_path, "sbatch", f"""\
        printf '%s\\n' "$@" > {tmp_path}/args
        cat > {tmp_path}/script
        [ "$SLURM_TIME_FORMAT" = "%s" ] || exit 9
        echo 4242
        """)
    t = CommandTransport(bin_dir=str(tmp_path), timeout_s=5)
    req = build_request(SPEC, "wl-stdin", IDENT, SlurmConfig())
    assert t.submit(req) == "4242"
    assert (tmp_path / "script").read_text() == req.script
    args = (tmp_path / "args").read_text().splitlines()
    assert "--job-name=wl-stdin" in args and "--comment=wl-stdin" in args and "--gres=gpu:a100:1" in args


def test_submit_parsable_with_cluster(tmp_path):
    fake_bin(tmp_path, "sbatch", "cat >/dev/null; echo '77;ci'\n")
    assert CommandTransport(bin_dir=str(tmp_path)).submit(build_request(SPEC, "wl-x", IDENT, SlurmConfig())) == "77"


@pytest.mark.parametrize("stderr,exc", [
    ("sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified",
     Rejected),
    ("sbatch: error: Batch job submission failed: Requested node configuration is not available", Rejected),
    ("sbatch: error: Batch job submission failed: Invalid qos specification", Rejected),
    ("sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)",
     Unavailable),
    ("sbatch: error: Batch job submission failed: Socket timed out on send/recv operation", Unavailable),
])
def test_submit_errors(tmp_path, stderr, exc):
    fake_bin(tmp_path, "sbatch", f"cat >/dev/null; echo '{stderr}' >&2; exit 1\n")
    t = CommandTransport(bin_dir=str(tmp_path))
    with pytest.raises(exc) as info:
        t.submit(build_request(SPEC, "wl-x", IDENT, SlurmConfig()))
    if exc is Rejected:
        assert info.value.raw == stderr
        assert info.value.reason == stderr.split("failed: ")[1]


def test_timeout_and_missing_binary_are_unavailable(tmp_path):
    fake_bin(tmp_path, "sbatch", "sleep 5\n")
    with pytest.raises(Unavailable, match="timed out"):
        CommandTransport(bin_dir=str(tmp_path), timeout_s=0.5).submit(
            build_request(SPEC, "wl-x", IDENT, SlurmConfig()))
    with pytest.raises(Unavailable, match="cannot run"):
        CommandTransport(bin_dir=str(tmp_path / "nowhere")).nodes()


def test_ssh_failure_is_unavailable(tmp_path):
    fake_bin(tmp_path, "ssh", "echo 'ssh: connect to host login1 port 22: Connection refused' >&2; exit 255\n")
    t = CommandTransport(prefix=[str(tmp_path / "ssh"), "login1"])
    assert t.remote_shell
    with pytest.raises(Unavailable, match="ssh failed"):
        t.submit(build_request(SPEC, "wl-x", IDENT, SlurmConfig()))


# ------------------------------------------------------------------ queries

def test_squeue_unknown_ids_are_empty(tmp_path):
    fake_bin(tmp_path, "squeue", "echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1\n")
    assert CommandTransport(bin_dir=str(tmp_path)).jobs(job_ids=["999"]) == []


def test_squeue_controller_down(tmp_path):
    fake_bin(tmp_path, "squeue",
             "echo 'slurm_load_jobs error: Unable to contact slurm controller (connect failure)' >&2; exit 1\n")
    with pytest.raises(Unavailable, match="Unable to contact"):
        CommandTransport(bin_dir=str(tmp_path)).jobs()


def test_squeue_replay(tmp_path):
    fake_bin(tmp_path, "squeue", f"""\
        printf '%s\\n' "$@" > {tmp_path}/args
        cat {FIXTURES}/squeue-O-us.txt
        """)
    jobs = CommandTransport(bin_dir=str(tmp_path)).jobs(names=["wl-fix-run"], job_ids=["13"])
    assert {j.job_id for j in jobs} >= {"13", "14"}  # the stand-in ignores filters
    args = (tmp_path / "args").read_text().splitlines()
    assert "--states=all" in args and "--jobs=13" in args and "--name=wl-fix-run" in args
    assert f"--Format={parsers.squeue_format()}" in args


def test_scontrol_replay(tmp_path):
    fake_bin(tmp_path, "scontrol", f"cat {FIXTURES}/scontrol-show-node-d.txt\n")
    nodes = CommandTransport(bin_dir=str(tmp_path)).nodes()
    assert [n.name for n in nodes] == ["n1", "n2"] and nodes[1].flags == {"DRAIN"}


def test_sacct_streams_and_fails_late(tmp_path):
    fake_bin(tmp_path, "sacct", f"""\
        printf '%s\\n' "$@" > {tmp_path}/args
        cat {FIXTURES}/sacct-us.txt
        echo 'sacct: error: Problem talking to the database: Connection refused' >&2
        exit 1
        """)
    t = CommandTransport(bin_dir=str(tmp_path))
    it = t.accounting(since=datetime.now(timezone.utc) - timedelta(hours=1))
    first = next(it)
    assert first.job_id == "1"
    with pytest.raises(Unavailable, match="database"):
        list(it)
    args = (tmp_path / "args").read_text().splitlines()
    assert args[:5] == ["--allusers", "--parsable2", "--allocations", "--noheader", f"--delimiter={parsers.US}"]
    assert "--format=JobID,JobName,Account,Partition,AllocTRES,ElapsedRaw,Start,End,State,Comment,NodeList,ReqTRES,User" in args
    assert any(a.startswith("--starttime=now-") for a in args)


def test_sacct_stream_timeout(tmp_path):
    fake_bin(tmp_path, "sacct", f"head -1 {FIXTURES}/sacct-us.txt; sleep 5\n")
    t = CommandTransport(bin_dir=str(tmp_path), stream_timeout_s=0.5)
    with pytest.raises(Unavailable, match="timed out"):
        list(t.accounting(since=None))


def test_scancel_already_done_is_fine(tmp_path):
    fake_bin(tmp_path, "scancel",
             "echo 'scancel: error: Kill job error on job id 5: Job/step already completing or completed' >&2; exit 1\n")
    CommandTransport(bin_dir=str(tmp_path)).cancel("5")
    fake_bin(tmp_path, "scancel",
             "echo 'scancel: error: Kill job error on job id 5: Unable to contact slurm controller (connect failure)' >&2; exit 1\n")
    with pytest.raises(Unavailable):
        CommandTransport(bin_dir=str(tmp_path)).cancel("5")


def test_sacctmgr_associations_and_add(tmp_path):
    log = tmp_path / "log"
    fake_bin(tmp_path, "sacctmgr", f"""\
        echo "$@" >> {log}
        case "$*" in
          *"show associations"*)
            if [ -f {tmp_path}/created ]; then printf 'ci|newacct|\\nci|newacct|alice\\n'; fi ;;
          *"add account"*) touch {tmp_path}/created ;;
        esac
        """)
    t = CommandTransport(bin_dir=str(tmp_path))
    assert t.associations("newacct") == []
    t.add_account("newacct", ["alice"])
    calls = log.read_text().splitlines()
    assert any(c.startswith("--immediate add account newacct") for c in calls)
    assert [a.user for a in t.associations("newacct")] == ["", "alice"]


# ------------------------------------------------------------------ REST

class FakeResponse:
    def __init__(self, status: int, payload=None, text: str = ""):
        self.status_code = status
        self._payload = payload
        self.text = text

    def json(self):
        if self._payload is None:
            raise ValueError("no json")
        return self._payload


class FakeSession:
    def __init__(self, routes):
        self.routes = routes  # {(method, path): response or exception}
        self.calls = []

    def request(self, method, url, json=None, params=None, headers=None, timeout=None):
        path = url.split("://", 1)[1].split("/", 1)[1]
        self.calls.append((method, "/" + path, json, params, headers))
        resp = self.routes.get((method, "/" + path))
        if isinstance(resp, Exception):
            raise resp
        return resp or FakeResponse(404, None, "not found")


def rest(routes, **kw) -> tuple[RestTransport, FakeSession]:
    session = FakeSession(routes)
    kw.setdefault("api_version", "v0.0.38")
    return RestTransport("http://slurm:6820", "tok-123", user_name="svc", session=session, **kw), session


def test_rest_submit_and_headers():
    t, s = rest({("POST", "/slurm/v0.0.38/job/submit"): FakeResponse(200, read_json_fixture("rest-submit.json"))})
    assert t.submit(build_request(SPEC, "wl-r", IDENT, SlurmConfig())) == "9"
    method, path, body, _, headers = s.calls[0]
    assert headers["X-SLURM-USER-NAME"] == "svc" and headers["X-SLURM-USER-TOKEN"] == "tok-123"
    assert body["job"]["comment"] == "wl-r" and body["script"].startswith("#!/bin/bash")


def test_rest_submit_held_job_reply_lists_an_error_but_has_an_id():
    reply = {"errors": [{"error_code": 2042, "error": "Job is in held state, pending scheduler release"}],
             "job_id": 3885, "step_id": "BATCH"}
    t, _ = rest({("POST", "/slurm/v0.0.38/job/submit"): FakeResponse(200, reply)})
    assert t.submit(build_request(SPEC, "wl-r", IDENT, SlurmConfig(submit_held=True))) == "3885"


def test_rest_submit_rejected_and_unavailable():
    refusal = {"errors": [{"error_code": 2045,
                           "error": "Invalid account or account/partition combination specified"}]}
    t, _ = rest({("POST", "/slurm/v0.0.38/job/submit"): FakeResponse(500, refusal)})
    with pytest.raises(Rejected, match="Invalid account"):
        t.submit(build_request(SPEC, "wl-r", IDENT, SlurmConfig()))
    down = {"errors": [{"error": "Unspecified error", "errno": -1}]}
    t, _ = rest({("POST", "/slurm/v0.0.38/job/submit"): FakeResponse(500, down)})
    with pytest.raises(Unavailable):
        t.submit(build_request(SPEC, "wl-r", IDENT, SlurmConfig()))
    t, _ = rest({("POST", "/slurm/v0.0.38/job/submit"): requests.ConnectionError("refused")})
    with pytest.raises(Unavailable, match="refused"):
        t.submit(build_request(SPEC, "wl-r", IDENT, SlurmConfig()))
    t, _ = rest({("GET", "/slurm/v0.0.38/nodes"): FakeResponse(401, None, "Authentication failure")})
    with pytest.raises(Unavailable, match="401"):
        t.nodes()


def test_rest_reads():
    t, s = rest({
        ("GET", "/slurm/v0.0.38/jobs"): FakeResponse(200, read_json_fixture("rest-jobs.json")),
        ("GET", "/slurm/v0.0.38/nodes"): FakeResponse(200, read_json_fixture("sinfo.json")),
        ("GET", "/slurmdb/v0.0.38/jobs"): FakeResponse(200, read_json_fixture("rest-slurmdb-jobs.json")),
        ("GET", "/slurmdb/v0.0.38/job/3"): FakeResponse(200, {"jobs": [
            j for j in read_json_fixture("rest-slurmdb-jobs.json")["jobs"] if j["job_id"] == 3]}),
        ("GET", "/slurmdb/v0.0.38/job/99"): FakeResponse(
            500, {"errors": [{"error_number": 9003, "error": "Nothing found with query"}], "jobs": []}),
    })
    assert [j.job_id for j in t.jobs(job_ids=["5", "7", "404"])] == ["5", "7"]
    assert [j.job_id for j in t.jobs(states=["PENDING"])] == ["5", "7"]
    assert [j.job_id for j in t.jobs(names=["multinode"])] == ["3"]
    assert [n.name for n in t.nodes()] == ["n1", "n2"]
    recs = list(t.accounting(since=datetime.now(timezone.utc) - timedelta(hours=1), names=["rest-job"]))
    params = s.calls[-1][3]
    assert params["job_name"] == "rest-job" and params["start_time"].startswith("now-")
    assert len(recs) == len(read_json_fixture("rest-slurmdb-jobs.json")["jobs"])  # filter not applied here
    assert [r.job_id for r in t.accounting(job_ids=["3", "99"])] == ["3"]


def test_rest_api_auto_detection():
    doc = {"paths": {"/slurm/v0.0.38/jobs": {}, "/slurm/v0.0.37/jobs": {}, "/slurm/v0.0.99/jobs": {},
                     "/slurmdb/v0.0.38/jobs": {}}}
    t, _ = rest({("GET", "/openapi/v3"): FakeResponse(200, doc)}, api_version="auto")
    assert t.api_version == "v0.0.38"


def test_rest_offered_versions_of_a_24_11_server():
    """24.11's document lists /slurm/ and /slurmdb/ paths of v0.0.40-42 (and the
    OpenAPI paths themselves); the newest one wins."""
    doc = {"paths": {f"/{kind}/v0.0.{n}/{tail}": {} for kind, tail in (("slurm", "jobs/"), ("slurmdb", "jobs/"))
                     for n in (40, 41, 42)} | {"/openapi/v3": {}}}
    t, _ = rest({("GET", "/openapi/v3"): FakeResponse(200, doc)}, api_version="auto")
    assert t.offered_api_versions() == ["v0.0.40", "v0.0.41", "v0.0.42"]
    assert t.api_version == "v0.0.42"


def test_read_token(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_TOKEN", "abc")
    assert read_token("env:MY_TOKEN") == "abc"
    (tmp_path / "jwt").write_text("xyz\n")
    assert read_token(f"file:{tmp_path}/jwt") == "xyz"
    assert read_token(lambda: " q ") == "q"
    monkeypatch.delenv("MY_TOKEN")
    with pytest.raises(Unavailable):
        read_token("env:MY_TOKEN")
