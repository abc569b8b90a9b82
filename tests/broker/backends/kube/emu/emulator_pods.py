"""Just enough kube-scheduler for the emulator: fit GPU pods onto nodes, make Pods.

A pod fits a node when the node is Ready and schedulable, carries every label of
the pod's nodeSelector (and satisfies ``In`` terms of required node affinity),
and has enough free devices of each GPU resource the pod asks for.  Free means
allocatable minus what bound, unfinished pods already hold.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

from broker.backends.kube.common import is_gpu_resource, quantity, rfc3339
from tests.broker.backends.kube.emu.emulator_store import Store

NODES = ("", "nodes")
PODS = ("", "pods")


def pod_requests(pod_spec: dict[str, Any]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for container in pod_spec.get("containers") or []:
        res = container.get("resources") or {}
        for name, value in {**(res.get("limits") or {}), **(res.get("requests") or {})}.items():
            if is_gpu_resource(name):
                out[name] += quantity(value)
    return dict(out)


def _node_ok(node: dict[str, Any], pod_spec: dict[str, Any]) -> bool:
    labels = node["metadata"].get("labels") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in (node.get("status") or {}).get("conditions") or [])
    if not ready or (node.get("spec") or {}).get("unschedulable"):
        return False
    if any(labels.get(k) != v for k, v in (pod_spec.get("nodeSelector") or {}).items()):
        return False
    terms = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
             .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get(
        "nodeSelectorTerms") or []
    return not terms or any(_term_ok(labels, t) for t in terms)


def _term_ok(labels: dict[str, str], term: dict[str, Any]) -> bool:
    for expr in term.get("matchExpressions") or []:
        value, values = labels.get(expr["key"]), expr.get("values") or []
        op = expr.get("operator")
        if op == "In" and value not in values:
            return False
        if op == "Gt" and (value is None or quantity(value) <= quantity(values[0])):
            return False
    return True


def free_devices(store: Store) -> dict[tuple[str, str], int]:
    """(node, resource) -> devices not held by a bound, unfinished pod."""
    free: dict[tuple[str, str], int] = defaultdict(int)
    for node in store.list(NODES):
        for res, value in ((node.get("status") or {}).get("allocatable") or {}).items():
            if is_gpu_resource(res):
                free[(node["metadata"]["name"], res)] += quantity(value)
    for pod in store.list(PODS):
        node_name = (pod.get("spec") or {}).get("nodeName")
        if node_name and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            for res, n in pod_requests(pod["spec"]).items():
                free[(node_name, res)] -= n
    return free


def place(store: Store, pod_spec: dict[str, Any], count: int) -> list[str | None]:
    """Node names for ``count`` identical pods (None where one does not fit), first fit."""
    free = free_devices(store)
    need = pod_requests(pod_spec)
    nodes = [n for n in store.list(NODES) if _node_ok(n, pod_spec)]
    out: list[str | None] = []
    for _ in range(count):
        chosen = None
        for node in nodes:
            name = node["metadata"]["name"]
            if all(free[(name, r)] >= n for r, n in need.items()):
                chosen = name
                for r, n in need.items():
                    free[(name, r)] -= n
                break
        out.append(chosen)
    return out


def make_pod(store: Store, name: str, namespace: str, template: dict[str, Any],
             node: str | None, labels: dict[str, str], owner: dict[str, Any]) -> dict[str, Any]:
    spec = dict(template.get("spec") or {})
    if node:
        spec["nodeName"] = node
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "labels": {**((template.get("metadata") or {})
                                                    .get("labels") or {}), **labels},
                        "ownerReferences": [owner]},
           "spec": spec,
           "status": {"phase": "Running" if node else "Pending",
                      "startTime": rfc3339(store.clock())}}
    return store.create(PODS, namespace, pod)


def finish_pods(store: Store, owner_uid: str, phase: str) -> None:
    for _, obj in store.dependents(owner_uid):
        if obj.get("kind") == "Pod":
            obj["status"]["phase"] = phase
            if not obj["status"].get("containerStatuses"):  # as the kubelet reports an end
                terminate_pod(obj, "Completed" if phase == "Succeeded" else "Error",
                              0 if phase == "Succeeded" else 1)
            store.bump(obj)


def terminate_pod(pod: dict[str, Any], reason: str, exit_code: int) -> None:
    """The pod's container ended (``OOMKilled`` and 137: killed for memory)."""
    pod["status"]["containerStatuses"] = [{
        "name": "worker", "ready": False, "restartCount": 0, "image": "", "imageID": "",
        "state": {"terminated": {"exitCode": exit_code, "reason": reason,
                                 "finishedAt": pod["status"].get("startTime")}}}]


def delete_pods(store: Store, owner_uid: str) -> None:
    for gp, obj in store.dependents(owner_uid):
        if obj.get("kind") == "Pod":
            store.delete(gp, obj["metadata"]["namespace"], obj["metadata"]["name"])
