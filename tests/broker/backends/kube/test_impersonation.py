"""A person with a Kubernetes user: their Job (Kueue) or vcjob (Volcano) is created as them
(Impersonate-User on the create only); without one, the broker creates it as itself."""
from __future__ import annotations

from dataclasses import replace

from tests.broker.backends.kube.conftest import IDENTITY


def test_create_impersonates_the_person_and_reads_stay_the_brokers(harness):
    harness.identity = replace(IDENTITY, run_as_person=True, run_as_user="gpb-alice", k8s_user="alice@example.org")
    job_id = harness.submit("wl-imp1")
    assert harness.backend.status([job_id])[job_id].job_id == job_id
    creates = [r for r in harness.emu.impersonated if r[0] == "POST"]
    assert len(creates) == 1 and creates[0][2] == "alice@example.org"
    assert [r for r in harness.emu.impersonated if r[0] != "POST"] == []


def test_no_kubernetes_user_no_impersonation(harness):
    harness.identity = replace(IDENTITY, run_as_person=True, run_as_user="gpb-alice")
    harness.submit("wl-imp2")
    assert harness.emu.impersonated == []
