"""Fixtures for the tests against real control planes (`scripts/k8s-cluster up`).

They are marked ``k8s`` and run only with K8S_TESTS=1; without it they skip saying so.
With K8S_TESTS=1 they never skip: clusters that are not up make them fail.
"""
from __future__ import annotations

from typing import Iterator

import pytest
from kubernetes import client

from broker.backends.base import ProjectIdentity
from broker.backends.kube import BackendSettings, KubeConfig, KueueBackend
from broker.backends.kube.multikueue import MultiKueueBackend
from broker.backends.kube.volcano import VolcanoBackend

from . import api_versions as versions
from . import cluster as c
from .gate import cluster_env, skip_k8s_test_when_off

DEFAULT_ENV_FILE = "/run/k8s-ci/env"
IDENTITY = ProjectIdentity(tenant="acme", project="proj", k8s_namespace=c.NAMESPACE)
MODEL_NAMES = {c.A100: "A100-80GB", c.H100: "H100", c.A100_40: "A100-40GB", c.L40S: "L40S"}


OFF = ("real Kubernetes tests are off: run `scripts/k8s-cluster up` and set K8S_TESTS=1 "
       "to run them")


@pytest.fixture(autouse=True)
def _k8s_gate(request):
    skip_k8s_test_when_off(request, OFF)


@pytest.fixture(scope="session")
def k8s_env() -> Iterator[dict[str, str]]:
    env = cluster_env("K8S_CI_ENV", DEFAULT_ENV_FILE, off=OFF, start="run `scripts/k8s-cluster up` first")
    # K8S_KUEUE_V1BETA1=unserved: Kueue as v0.20 ships it, on both clusters for the session
    with versions.as_the_run_asks(env, ("K8S_MAIN_KUBECONFIG", "K8S_MANAGER_KUBECONFIG")):
        yield env


def settings(**kw) -> BackendSettings:
    return BackendSettings(default_namespace=c.NAMESPACE, model_names=MODEL_NAMES, **kw)


@pytest.fixture(scope="session")
def main_api(k8s_env) -> Iterator[client.ApiClient]:
    api = c.api_client(k8s_env["K8S_MAIN_KUBECONFIG"])
    c.apply(api, *c.kueue_nodes())
    c.apply(api, *c.kueue_objects())
    c.wait_for(lambda: _ready_nodes(api) >= 4, 60, what="kwok nodes Ready")
    yield api
    api.close()


def _ready_nodes(api: client.ApiClient) -> int:
    nodes = client.CoreV1Api(api).list_node(label_selector="type=kwok").items
    return sum(1 for n in nodes for cond in (n.status.conditions or [])
               if cond.type == "Ready" and cond.status == "True")


@pytest.fixture
def kueue_cluster(main_api) -> Iterator[client.ApiClient]:
    c.delete_jobs(main_api)
    yield main_api
    c.delete_jobs(main_api)


@pytest.fixture
def kueue_backend(k8s_env, kueue_cluster) -> Iterator[KueueBackend]:
    backend = KueueBackend("k8s-main", KubeConfig(kubeconfig=k8s_env["K8S_MAIN_KUBECONFIG"]),
                           settings())
    yield backend
    backend.close()


@pytest.fixture
def volcano_backend(k8s_env, kueue_cluster) -> Iterator[VolcanoBackend]:
    backend = VolcanoBackend("k8s-main", KubeConfig(kubeconfig=k8s_env["K8S_MAIN_KUBECONFIG"]),
                             settings())
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def manager_api(k8s_env, main_api) -> Iterator[client.ApiClient]:
    api = c.api_client(k8s_env["K8S_MANAGER_KUBECONFIG"])
    c.apply(api, *c.multikueue_manager_objects(k8s_env["K8S_MULTIKUEUE_SECRET"]))
    yield api
    api.close()


@pytest.fixture
def multikueue_backend(k8s_env, manager_api, kueue_cluster) -> Iterator[MultiKueueBackend]:
    c.delete_jobs(manager_api)
    backend = MultiKueueBackend(
        "k8s-mk", KubeConfig(kubeconfig=k8s_env["K8S_MANAGER_KUBECONFIG"]), settings(),
        workers={"worker-main": KubeConfig(kubeconfig=k8s_env["K8S_MAIN_KUBECONFIG"])})
    yield backend
    backend.close()
    c.delete_jobs(manager_api)
