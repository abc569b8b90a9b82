"""Kueue without v1beta1, as Kueue v0.20 ships it: the run's switch and the CRD patch.

K8S_KUEUE_V1BETA1=unserved (CI's second k8s phase) makes the session stop serving
``kueue.x-k8s.io/v1beta1`` on every cluster before the first test and serve it again after
the last, so the same Kueue and MultiKueue tests run against a v1beta2-only API.  Kueue
v0.19.2 stores v1beta2, so no stored object needs v1beta1 to be read."""
from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .cluster import api_client, wait_for

GROUP = "kueue.x-k8s.io"
OLD = "v1beta1"


def v1beta1_wanted() -> bool:
    """What this run asks for: served (Kueue v0.19.2 as shipped) or not (as v0.20)."""
    value = os.environ.get("K8S_KUEUE_V1BETA1", "served")
    if value not in ("served", "unserved"):
        raise ValueError(f"K8S_KUEUE_V1BETA1 must be served or unserved, not {value!r}")
    return value == "served"


def is_served(api: client.ApiClient, version: str) -> bool:
    """Whether a read of ClusterQueues at ``version`` answers (False: the API's 404)."""
    try:
        client.CustomObjectsApi(api).list_cluster_custom_object(GROUP, version, "clusterqueues", limit=1)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def serve(api: client.ApiClient, version: str, served: bool) -> list[str]:
    """Set ``served`` on ``version`` of every Kueue CRD; the CRDs changed.  Waits until the
    API server answers accordingly."""
    ext = client.ApiextensionsV1Api(api)
    changed = []
    for crd in ext.list_custom_resource_definition().items:
        if crd.spec.group != GROUP:
            continue
        for i, v in enumerate(crd.spec.versions):
            if v.name == version and v.served != served:
                ext.patch_custom_resource_definition(crd.metadata.name, [
                    {"op": "test", "path": f"/spec/versions/{i}/name", "value": version},
                    {"op": "replace", "path": f"/spec/versions/{i}/served", "value": served}])
                changed.append(crd.metadata.name)
    wait_for(lambda: is_served(api, version) == served, 60,
             what=f"{GROUP}/{version} served={served}")
    return changed


@contextmanager
def as_the_run_asks(env: Mapping[str, str], kubeconfig_keys: Sequence[str]) -> Iterator[None]:
    """For a session: v1beta1 served as the run asks on each cluster named by its kubeconfig
    key in ``env``; served again afterwards."""
    if v1beta1_wanted():
        yield
        return
    apis = [api_client(env[key]) for key in kubeconfig_keys]
    for api in apis:
        serve(api, OLD, False)
    try:
        yield
    finally:
        for api in apis:
            serve(api, OLD, True)
            api.close()
