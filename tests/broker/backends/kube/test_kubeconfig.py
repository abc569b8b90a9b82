"""Opt-in, read-only checks against a real cluster named by $KUBECONFIG.

Run with:  KUBECONFIG=~/.kube/config .venv/bin/pytest tests/broker/backends/kube -m kubeconfig
Nothing is created; only lists and look-ups are made.
"""
from __future__ import annotations

import os

import pytest

from broker.backends.base import Rejected
from broker.backends.kube import KubeConfig, KueueBackend, VolcanoBackend

pytestmark = [
    pytest.mark.kubeconfig,
    pytest.mark.skipif(not os.environ.get("KUBECONFIG"),
                       reason="opt-in: set KUBECONFIG to a real cluster's kubeconfig to run "
                              "the read-only Kubernetes checks"),
]


@pytest.mark.parametrize("backend_cls", [KueueBackend, VolcanoBackend])
def test_real_cluster_inventory_and_find(backend_cls):
    backend = backend_cls("real", KubeConfig(kubeconfig=os.environ["KUBECONFIG"]))
    try:
        assert backend.find("wl-does-not-exist-0000") is None
        try:
            snap = backend.inventory()
        except Rejected as exc:  # CRDs of this scheduler not installed (404)
            pytest.skip(f"{backend.kind} not installed on this cluster: {exc}")
        assert snap.cluster == "real"
        for pool in snap.pools:
            assert pool.gpus_allocated <= pool.gpus_total
    finally:
        backend.close()
