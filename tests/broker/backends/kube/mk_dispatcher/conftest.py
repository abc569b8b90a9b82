"""Fixtures of the dispatcher-mode tests (real manager and two real workers).

Marked ``k8s`` and run only with K8S_TESTS=1 (then they never skip: clusters that are not
up make them fail).  The clusters' env file: $K8S_MKD_ENV, default /run/k8s-mkd/env."""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from broker.models import Cluster, Quota
from broker.services.fleet.registration import gpu_classes_from_policy
from broker.services.fleet.policy import policy_override
from tests.broker.backends.kube.real import api_versions as versions
from tests.broker.backends.kube.real import cluster as c
from tests.broker.backends.kube.real.gate import cluster_env, skip_k8s_test_when_off
from tests.factories import (
    MembershipFactory,
    ProjectFactory,
    TenantFactory,
    UserFactory,
)

from . import support as s

DEFAULT_ENV_FILE = "/run/k8s-mkd/env"
OFF = ("real MultiKueue dispatcher tests are off: start the clusters (.ci/setup.d/k8s-mkd.sh) "
       "and set K8S_TESTS=1")
# node product label -> the model names of the policy's GPU classes
POLICY_MODELS = {c.A100: "NVIDIA A100-SXM4-80GB", c.H100: "NVIDIA H100 80GB HBM3",
                 c.A100_40: "NVIDIA A100-SXM4-40GB"}
DISPATCHER = "gpubroker.io/dispatcher"
ADMISSION_TIMEOUT_S = 12


@pytest.fixture(autouse=True)
def _k8s_gate(request):
    skip_k8s_test_when_off(request, OFF)


@pytest.fixture(scope="session")
def mkd_env() -> Iterator[dict[str, str]]:
    env = cluster_env("K8S_MKD_ENV", DEFAULT_ENV_FILE, off=OFF, start="run .ci/setup.d/k8s-mkd.sh first")
    if env.get("K8S_MK_DISPATCHER") != DISPATCHER or "K8S_WORKER2_KUBECONFIG" not in env:
        path = os.environ.get("K8S_MKD_ENV", DEFAULT_ENV_FILE)
        pytest.fail(f"{path}: the manager must run with dispatcherName {DISPATCHER} and worker2 must be up")
    # K8S_KUEUE_V1BETA1=unserved: Kueue as v0.20 ships it, on the manager and both workers
    keys = ("K8S_MANAGER_KUBECONFIG", "K8S_MAIN_KUBECONFIG", "K8S_WORKER2_KUBECONFIG")
    with versions.as_the_run_asks(env, keys):
        yield env


def _ready(api: client.ApiClient, count: int) -> bool:
    nodes = client.CoreV1Api(api).list_node(label_selector="type=kwok").items
    return sum(1 for n in nodes for cond in (n.status.conditions or [])
               if cond.type == "Ready" and cond.status == "True") >= count


@pytest.fixture(scope="session")
def mk_apis(mkd_env) -> Iterator[dict[str, client.ApiClient]]:
    """``manager``, ``worker-main``, ``worker-worker2``: API clients, objects applied."""
    apis = {"manager": c.api_client(mkd_env["K8S_MANAGER_KUBECONFIG"])}
    for worker, key in s.WORKERS.items():
        api = apis[worker] = c.api_client(mkd_env[key])
        c.apply(api, *s.worker_nodes(worker.removeprefix("worker-")))
        c.apply(api, *s.worker_objects())
        c.wait_for(lambda api=api: _ready(api, 2), 60, what=f"{worker} kwok nodes Ready")
    c.apply(apis["manager"], *s.manager_objects({
        "worker-main": mkd_env["K8S_MULTIKUEUE_SECRET"],
        "worker-worker2": mkd_env["K8S_MULTIKUEUE_SECRET_WORKER2"]}))
    c.wait_for(lambda: _active(apis["manager"]) >= 2, 90, what="both MultiKueueClusters Active")
    yield apis
    for api in apis.values():
        api.close()


def _active(api: client.ApiClient) -> int:
    items = client.CustomObjectsApi(api).list_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "multikueueclusters")["items"]
    return sum(1 for mkc in items for cond in (mkc.get("status") or {}).get("conditions") or []
               if cond.get("type") == "Active" and cond.get("status") == "True")


@pytest.fixture
def clean(mk_apis) -> Iterator[dict[str, client.ApiClient]]:
    for api in mk_apis.values():
        s.delete_all(api)
    yield mk_apis
    for api in mk_apis.values():
        s.delete_all(api)


def policy_text(nominate: int = 1) -> str:
    """The default policy, ranked by cost (GPU price and data transfer), with a short
    admission time for nominations."""
    default = Path(__file__).resolve().parents[5] / "broker" / "policy" / "default.yaml"
    text = default.read_text(encoding="utf-8").replace("preset: on-prem-first", "preset: cost")
    return text + f"\nmultikueue:\n  admission_timeout_s: {ADMISSION_TIMEOUT_S}\n  nominate: {nominate}\n"


@pytest.fixture
def cost_policy():
    with policy_override(policy_text(), "mk-dispatcher tests") as loaded:
        yield loaded


@pytest.fixture
def fleet(db, settings, mkd_env, clean, cost_policy):
    """Broker side: the manager in dispatcher mode, its two workers as their own clusters
    (worker-main: 3.00/GPU-h and the dataset; worker2: 1.00/GPU-h), a tenant with quota."""
    settings.GPUBROKER_ENABLE_KUEUE = True
    settings.GPUBROKER_ENABLE_SIMULATOR = False
    tenant = TenantFactory(slug="physics")
    project = ProjectFactory(tenant=tenant, slug="lattice", k8s_namespace=s.NS)
    user = UserFactory(username="mk-researcher")
    MembershipFactory(user=user, tenant=tenant, role="researcher")
    classes = {g.slug: g for g in gpu_classes_from_policy()}
    Quota.objects.create(tenant=tenant, gpu_class=classes["a100-80gb"], limit_gpus=12)
    common = {"namespace": s.NS, "queue": "default", "model_names": POLICY_MODELS}
    a = Cluster.objects.create(
        name="mk-a", kind="kueue", region="eu-west", location="onprem", price_per_gpu_hour=3,
        egress_per_gb="0.5", config={**common, "kubeconfig": mkd_env["K8S_MAIN_KUBECONFIG"],
                                     "data_locations": ["lattice-ds"]})
    b = Cluster.objects.create(
        name="mk-b", kind="kueue", region="eu-west", location="onprem", price_per_gpu_hour=1,
        config={**common, "kubeconfig": mkd_env["K8S_WORKER2_KUBECONFIG"]})
    manager = Cluster.objects.create(
        name="mk-manager", kind="multikueue", region="eu-west", location="onprem",
        config={"kubeconfig": mkd_env["K8S_MANAGER_KUBECONFIG"], "dispatcher": {
            "name": DISPATCHER, "workers": {"worker-main": "mk-a", "worker-worker2": "mk-b"},
            "queues": {f"{s.NS}/default": {"project": "lattice", "gpu_class": "a100-80gb"}},
            "model_names": POLICY_MODELS}})
    return {"manager": manager, "a": a, "b": b, "tenant": tenant, "project": project, "user": user,
            "apis": clean, "gpu_class": classes["a100-80gb"]}
