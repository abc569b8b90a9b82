"""A Kubernetes cluster that cannot be talked to is stale, says why on the clusters page,
crashes no task and releases no reservation.  (The expired token and the missing CRD need
a real API server: real/test_bad_input_real.py.)"""
from __future__ import annotations

import socket

import pytest

from .bad_input import assert_stale_and_shown, broken_cluster, run_every_task


@pytest.fixture(autouse=True)
def _kueue_on(settings):
    settings.GPUBROKER_ENABLE_KUEUE = True
    settings.GPUBROKER_BACKEND_TIMEOUT_S = 2


def test_malformed_kubeconfig_makes_the_cluster_stale_and_says_so(trio, login, tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text("apiVersion: v1\nclusters: [ {name: x, cluster: {server: \n")
    cluster = broken_cluster(trio, kubeconfig=str(path))
    run_every_task(cluster)
    assert_stale_and_shown(cluster, login, trio, f"malformed or unreadable kubeconfig {path}")


def test_unreachable_api_server_makes_the_cluster_stale_and_says_so(trio, login):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cluster = broken_cluster(trio, host=f"https://127.0.0.1:{port}", verify_ssl=False)
    run_every_task(cluster)
    assert_stale_and_shown(cluster, login, trio, f"API server https://127.0.0.1:{port} unreachable")
