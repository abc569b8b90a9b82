"""Bad input that needs a real API server: an expired service-account token (signed by the
cluster's own key, so only the expiry is wrong) and a CRD that is not installed."""
from __future__ import annotations

import pytest

from tests.broker.backends.kube.bad_input import (
    assert_stale_and_shown, broken_cluster, run_every_task)

pytestmark = pytest.mark.k8s


@pytest.fixture(autouse=True)
def _kube_on(settings):
    settings.GPUBROKER_ENABLE_KUEUE = True
    settings.GPUBROKER_ENABLE_VOLCANO = True
    settings.GPUBROKER_BACKEND_TIMEOUT_S = 5


def test_expired_token_makes_the_cluster_stale_and_says_so(trio, login, k8s_env, monkeypatch):
    monkeypatch.setenv("K8S_TEST_TOKEN", k8s_env["K8S_EXPIRED_TOKEN"])
    cluster = broken_cluster(trio, credentials_ref="env:K8S_TEST_TOKEN",
                             host=k8s_env["K8S_MAIN_API"], ca_cert=k8s_env["K8S_CA_CERT"])
    run_every_task(cluster)
    assert_stale_and_shown(cluster, login, trio, "credentials rejected by the API server")
    cluster.refresh_from_db()
    assert "HTTP 401" in cluster.last_error


def test_missing_crd_makes_the_cluster_stale_and_says_which(trio, login, k8s_env):
    # the MultiKueue manager runs Kueue only: Volcano's CRDs are not installed there
    cluster = broken_cluster(trio, kind="volcano", kubeconfig=k8s_env["K8S_MANAGER_KUBECONFIG"])
    run_every_task(cluster)
    assert_stale_and_shown(cluster, login, trio, "CRD missing")
    cluster.refresh_from_db()
    assert "scheduling.volcano.sh/v1beta1" in cluster.last_error
