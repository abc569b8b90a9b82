"""Which Kueue API versions a cluster serves: the backend reads v1beta2 only, so it keeps
working where v1beta1 is gone (Kueue v0.20), and says which API is missing where not."""
from __future__ import annotations

import pytest

from broker.backends.base import JobState, Unavailable
from broker.backends.kube import KueueBackend
from broker.backends.kube.discovery import missing_api_text, served_versions
from broker.backends.kube.factory import kube_backend_from_config
from tests.broker.backends.kube.conftest import fast_config


def test_kueue_backend_works_when_v1beta1_is_no_longer_served(emu, kueue):
    emu.served["kueue.x-k8s.io"] = ("v1beta2",)
    job_id = kueue.submit()
    kueue.step()
    assert kueue.backend.status([job_id])[job_id].state == JobState.RUNNING
    assert any(p.name == "a100" for p in kueue.backend.inventory().pools)
    assert not [path for _, path in emu.requests if "/v1beta1/" in path and "kueue" in path]


def test_a_version_the_cluster_no_longer_serves_is_named_with_the_ones_it_does(emu, kueue):
    emu.served["kueue.x-k8s.io"] = ("v1beta2",)
    old = KueueBackend("k8s-1", fast_config(emu), api_version="v1beta1")
    with pytest.raises(Unavailable) as err:
        old.inventory()
    text = str(err.value)
    assert "kueue.x-k8s.io/v1beta1" in text and "serves kueue.x-k8s.io at v1beta2 only" in text
    assert "CRD missing" not in text  # Kueue is there: the version is what is missing


def test_neither_kueue_version_served_says_so_and_names_the_group(emu, kueue):
    emu.served["kueue.x-k8s.io"] = ()
    with pytest.raises(Unavailable) as err:
        kueue.backend.inventory()
    text = str(err.value)
    assert "serves no version of kueue.x-k8s.io (neither v1beta2 nor v1beta1)" in text
    assert "CRD missing" in text and "HTTP 404" in text


def test_discovery_failing_too_still_names_the_resource():
    text = missing_api_text("https://k8s:6443", "workloads", "kueue.x-k8s.io", "v1beta2", None)
    assert text == "CRD missing: the API server https://k8s:6443 does not serve workloads.kueue.x-k8s.io/v1beta2"


def test_served_versions_reads_the_discovery_document():
    doc = {"groups": [{"name": "batch", "versions": [{"version": "v1"}]},
                      {"name": "kueue.x-k8s.io", "versions": [{"version": "v1beta2"}, {"version": "v1beta1"}]}]}
    assert served_versions(doc, "kueue.x-k8s.io") == ("v1beta2", "v1beta1")
    assert served_versions(doc, "scheduling.volcano.sh") == ()
    assert served_versions(None, "batch") == ()


def test_an_unknown_kueue_api_version_in_the_config_is_refused_naming_the_key():
    with pytest.raises(Unavailable, match="kueue_api_version 'v1' is not one of v1beta2, v1beta1"):
        kube_backend_from_config("kueue", "c1", {"kueue_api_version": "v1"})
