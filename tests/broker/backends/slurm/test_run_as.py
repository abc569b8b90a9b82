"""Jobs that run as the person: sbatch --uid/--gid, slurmrestd impersonation, the user in
accounting.  (Against the real cluster: test_run_as_real.py.)"""
from __future__ import annotations

import pytest

from broker.backends.base import ProjectIdentity, Rejected
from broker.backends.slurm import parsers
from broker.backends.slurm import json_records
from broker.backends.slurm.config import SlurmConfig
from broker.backends.slurm.mapping import build_request, sbatch_args
from tests.broker.backends.slurm.support import read_fixture
from tests.broker.backends.slurm.test_mapping import spec
from tests.broker.backends.slurm.test_transports import FakeResponse, rest

ACCOUNT = ProjectIdentity(tenant="t", project="p", slurm_account="general")
ALICE = ProjectIdentity(tenant="t", project="p", slurm_account="general", run_as_person=True,
                        run_as_user="gpb-alice", run_as_group="gpb-alice")


def test_project_account_jobs_carry_no_uid():
    args = sbatch_args(build_request(spec(), "wl-a", ACCOUNT, SlurmConfig()))
    assert not [a for a in args if a.startswith(("--uid", "--gid"))]


def test_person_jobs_are_submitted_with_their_uid_and_gid():
    args = sbatch_args(build_request(spec(), "wl-a", ALICE, SlurmConfig()))
    assert "--uid=gpb-alice" in args and "--gid=gpb-alice" in args and "--account=general" in args


def test_person_without_identity_is_refused_before_slurm_is_asked():
    nobody = ProjectIdentity(tenant="t", project="p", run_as_person=True)
    with pytest.raises(Rejected, match="no cluster identity"):
        build_request(spec(), "wl-a", nobody, SlurmConfig())


@pytest.mark.parametrize("name", ["Alice", "1000", "-x", "a b", "alice;id", "x" * 33])
def test_a_name_that_is_no_posix_name_never_reaches_sbatch(name):
    with pytest.raises(Rejected, match="not a POSIX name"):
        build_request(spec(), "wl-a", ProjectIdentity("t", "p", run_as_person=True, run_as_user=name),
                      SlurmConfig())


def test_rest_submit_impersonates_the_person_and_reads_as_the_broker():
    reply = {"job_id": 9, "errors": []}
    t, session = rest({("POST", "/slurm/v0.0.38/job/submit"): FakeResponse(200, reply),
                       ("GET", "/slurm/v0.0.38/jobs"): FakeResponse(200, {"jobs": []})})
    assert t.submit(build_request(spec(), "wl-a", ALICE, SlurmConfig())) == "9"
    t.jobs()
    (_, _, _, _, submit_headers), (_, _, _, _, read_headers) = session.calls
    assert submit_headers["X-SLURM-USER-NAME"] == "gpb-alice"
    assert submit_headers["X-SLURM-USER-TOKEN"] == "tok-123"  # the SlurmUser token names another user
    assert read_headers["X-SLURM-USER-NAME"] == "svc"


def test_accounting_records_the_user_the_job_ran_as():
    recs = list(parsers.iter_sacct(read_fixture("sacct-us.txt").splitlines()))
    assert recs and {r.user for r in recs} == {"root"}
    rest_job = {"job_id": 5, "name": "wl-x", "account": "general", "user": "gpb-bob",
                "state": {"current": "COMPLETED"}, "time": {"elapsed": 60, "start": 1, "end": 61}}
    assert json_records.acct_from_json(rest_job).user == "gpb-bob"
