"""The emulator itself, spoken to with the official client like a real API server."""
from __future__ import annotations

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from broker.backends.base import Unavailable
from broker.backends.kube.common import KubeClient, KubeConfig
from tests.broker.backends.kube.emu.emulator_store import matches_fields, matches_labels


@pytest.fixture
def api(emu):
    kc = KubeClient(KubeConfig(host=emu.url, connect_timeout_s=0.5, read_timeout_s=0.5))
    yield kc
    kc.close()


def _job(name: str, labels: dict | None = None) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "busybox"}]}}}}


def test_create_get_list_delete_with_typed_client(emu):
    api_client = k8s.ApiClient(k8s.Configuration(host=emu.url))
    batch = k8s.BatchV1Api(api_client)
    created = batch.create_namespaced_job("ns", _job("a", {"x": "1"}))
    assert created.metadata.uid and created.metadata.namespace == "ns"
    with pytest.raises(ApiException) as err:
        batch.create_namespaced_job("ns", _job("a"))
    assert err.value.status == 409 and "AlreadyExists" in err.value.body
    assert [j.metadata.name for j in batch.list_job_for_all_namespaces(
        label_selector="x=1").items] == ["a"]
    batch.delete_namespaced_job("a", "ns", propagation_policy="Foreground")
    with pytest.raises(ApiException) as err:
        batch.read_namespaced_job("a", "ns")
    assert err.value.status == 404
    api_client.close()


def test_invalid_objects_get_422(api):
    with pytest.raises(Exception) as err:
        api.call(api.batch().create_namespaced_job, "ns", _job("Bad_Name"))
    assert getattr(err.value, "status", None) == 422
    job = _job("ok")
    job["spec"]["template"]["spec"]["containers"] = []
    with pytest.raises(Exception) as err:
        api.call(api.batch().create_namespaced_job, "ns", job)
    assert "containers: Required value" in err.value.raw


def test_patch_status_subresource(emu, api):
    emu.add("scheduling.volcano.sh", "queues", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": "q"}, "spec": {"weight": 1}})
    custom = api.custom()
    api.call(custom.patch_cluster_custom_object_status, "scheduling.volcano.sh", "v1beta1",
             "queues", "q", {"status": {"state": "Closed"}})
    got = api.call(custom.get_cluster_custom_object, "scheduling.volcano.sh", "v1beta1",
                   "queues", "q")
    assert got["status"]["state"] == "Closed" and got["spec"]["weight"] == 1


def test_cascade_and_orphan_delete(emu):
    store = emu.store
    owner = store.create(("batch", "jobs"), "ns", _job("o"))
    ref = {"apiVersion": "batch/v1", "kind": "Job", "name": "o", "uid": owner["metadata"]["uid"]}
    store.create(("", "pods"), "ns", {"kind": "Pod", "metadata": {
        "name": "p", "ownerReferences": [ref]}, "spec": {}})
    store.delete(("batch", "jobs"), "ns", "o", "Orphan")
    assert store.find(("", "pods"), "ns", "p")["metadata"]["ownerReferences"] == []
    owner = store.create(("batch", "jobs"), "ns", _job("o2"))
    store.create(("", "pods"), "ns", {"kind": "Pod", "metadata": {"name": "p2", "ownerReferences": [
        {**ref, "uid": owner["metadata"]["uid"]}]}, "spec": {}})
    store.delete(("batch", "jobs"), "ns", "o2", "Background")
    assert store.find(("", "pods"), "ns", "p2") is None


def test_selectors():
    obj = {"metadata": {"labels": {"a": "1", "b": "2"}, "name": "n"}, "status": {"phase": "Running"}}
    assert matches_labels(obj, "a=1,b") and matches_labels(obj, "a in (1,3),!c")
    assert not matches_labels(obj, "a!=1") and not matches_labels(obj, "b notin (2)")
    assert matches_fields(obj, "status.phase!=Succeeded,status.phase!=Failed")
    assert matches_fields(obj, "metadata.name=n") and not matches_fields(obj, "metadata.name=m")


def test_fault_switches(emu, api):
    core = api.core()
    emu.set_fault("error500", times=1)
    with pytest.raises(Unavailable, match="HTTP 500"):
        api.call(core.list_node)
    assert api.items(core.list_node) == []  # only one request was hit
    emu.set_fault("refuse")
    with pytest.raises(Unavailable):
        api.call(core.list_node)
    emu.set_fault(None)
    assert api.items(core.list_node) == []
    with pytest.raises(ValueError):
        emu.set_fault("explode")


def test_unknown_paths_are_404(api, emu):
    with pytest.raises(Exception) as err:
        api.call(api.custom().list_cluster_custom_object, "example.com", "v1", "widgets")
    assert getattr(err.value, "status", None) == 404


def test_bad_kubeconfig_is_unavailable(tmp_path):
    broken = KubeClient(KubeConfig(kubeconfig=str(tmp_path / "missing")))
    with pytest.raises(Unavailable, match="configuration"):
        broken.core()
