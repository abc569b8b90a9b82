"""Kueue's API versions on the real clusters: the session serves v1beta1 or not, as the run
asked (K8S_KUEUE_V1BETA1; CI runs the Kueue and MultiKueue tests both ways), and a backend
reading a version the API server does not serve is told which API is missing."""
from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from broker.backends.base import Unavailable
from broker.backends.kube import KubeConfig, KueueBackend

from . import api_versions as versions
from .cluster import api_client
from .conftest import settings

pytestmark = pytest.mark.k8s


@pytest.mark.parametrize("cluster", ["K8S_MAIN_KUBECONFIG", "K8S_MANAGER_KUBECONFIG"])
def test_v1beta1_reads_answer_as_this_run_serves_them(k8s_env, cluster):
    api = api_client(k8s_env[cluster])
    try:
        custom = client.CustomObjectsApi(api)
        custom.list_cluster_custom_object(versions.GROUP, "v1beta2", "clusterqueues")  # always there
        if versions.v1beta1_wanted():
            custom.list_cluster_custom_object(versions.GROUP, "v1beta1", "clusterqueues")
        else:
            with pytest.raises(ApiException) as err:
                custom.list_cluster_custom_object(versions.GROUP, "v1beta1", "clusterqueues")
            assert err.value.status == 404
    finally:
        api.close()


def test_a_backend_reading_an_unserved_version_is_told_which_api_is_missing(k8s_env, kueue_cluster):
    # v1beta1 where this run unserved it; else a version no Kueue serves
    missing = "v1alpha1" if versions.v1beta1_wanted() else "v1beta1"
    served = "v1beta2, v1beta1" if versions.v1beta1_wanted() else "v1beta2"
    backend = KueueBackend("k8s-main", KubeConfig(kubeconfig=k8s_env["K8S_MAIN_KUBECONFIG"]), settings(),
                           api_version=missing)
    try:
        with pytest.raises(Unavailable) as err:
            backend.inventory()
    finally:
        backend.close()
    text = str(err.value)
    assert f"kueue.x-k8s.io/{missing}" in text and f"serves kueue.x-k8s.io at {served} only" in text
    assert "HTTP 404" in text
