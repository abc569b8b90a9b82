"""The emulator's object store: what an API server keeps, minus etcd and watches.

Objects are plain dicts keyed by (group, plural) and (namespace, name).  The
store assigns uid/resourceVersion/creationTimestamp, answers label and field
selectors, refuses duplicates with 409, and deletes with owner-reference
cascading (Foreground can be made to linger until ``finalize_deletions``).
Objects returned by ``find``/``list`` are the live ones: the controller models
edit them in place under ``lock``; the HTTP layer serialises copies.
"""
from __future__ import annotations

import re
import threading
import uuid
from collections import defaultdict
from datetime import datetime
from typing import Any, Callable, Iterator

from broker.backends.kube.common import rfc3339

# (group, plural) -> (kind, namespaced)
RESOURCES: dict[tuple[str, str], tuple[str, bool]] = {
    ("", "nodes"): ("Node", False),
    ("", "pods"): ("Pod", True),
    ("", "events"): ("Event", True),
    ("batch", "jobs"): ("Job", True),
    ("kueue.x-k8s.io", "workloads"): ("Workload", True),
    ("kueue.x-k8s.io", "clusterqueues"): ("ClusterQueue", False),
    ("kueue.x-k8s.io", "localqueues"): ("LocalQueue", True),
    ("kueue.x-k8s.io", "resourceflavors"): ("ResourceFlavor", False),
    ("kueue.x-k8s.io", "multikueueclusters"): ("MultiKueueCluster", False),
    ("kueue.x-k8s.io", "multikueueconfigs"): ("MultiKueueConfig", False),
    ("kueue.x-k8s.io", "admissionchecks"): ("AdmissionCheck", False),
    ("kueue.x-k8s.io", "workloadpriorityclasses"): ("WorkloadPriorityClass", False),
    ("batch.volcano.sh", "jobs"): ("Job", True),
    ("scheduling.volcano.sh", "podgroups"): ("PodGroup", True),
    ("scheduling.volcano.sh", "queues"): ("Queue", False),
}
_DNS_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class ApiError(Exception):
    """An API answer other than success, rendered as a metav1.Status."""

    def __init__(self, code: int, reason: str, message: str):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message

    def status(self) -> dict[str, Any]:
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": self.message, "reason": self.reason, "code": self.code}


def _split_selector(selector: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in selector:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return [p for p in parts + [cur.strip()] if p]


def _requirement_ok(labels: dict[str, str], req: str) -> bool:
    match = re.match(r"^([\w./-]+)\s+(in|notin)\s+\((.*)\)$", req)
    if match:
        key, op, values = match.group(1), match.group(2), {
            v.strip() for v in match.group(3).split(",")}
        return (labels.get(key) in values) if op == "in" else (labels.get(key) not in values)
    for op in ("!=", "==", "="):
        if op in req:
            key, value = (s.strip() for s in req.split(op, 1))
            return (labels.get(key) != value) if op == "!=" else (labels.get(key) == value)
    if req.startswith("!"):
        return req[1:].strip() not in labels
    return req in labels


def matches_labels(obj: dict[str, Any], selector: str | None) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(_requirement_ok(labels, r) for r in _split_selector(selector or ""))


def _path_value(obj: dict[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return "" if cur is None else str(cur)


def matches_fields(obj: dict[str, Any], selector: str | None) -> bool:
    for req in _split_selector(selector or ""):
        negate = "!=" in req
        key, value = (s.strip() for s in re.split(r"!=|==|=", req, maxsplit=1))
        if (_path_value(obj, key) == value) == negate:
            return False
    return True


class Store:
    def __init__(self, clock: Callable[[], datetime]):
        self.lock = threading.RLock()
        self.clock = clock
        self.objects: dict[tuple[str, str], dict[tuple[str, str], dict[str, Any]]] = \
            defaultdict(dict)
        self.foreground_linger = False  # keep Foreground-deleted owners until finalized
        self._rv = 0

    @property
    def resource_version(self) -> str:
        return str(self._rv)

    def bump(self, obj: dict[str, Any]) -> None:
        with self.lock:
            self._rv += 1
            obj.setdefault("metadata", {})["resourceVersion"] = str(self._rv)

    def create(self, gp: tuple[str, str], namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
        kind, namespaced = RESOURCES[gp]
        meta = obj.setdefault("metadata", {})
        name = meta.get("name", "")
        if not name or len(name) > 253 or not _DNS_RE.match(name):
            raise ApiError(422, "Invalid", f'{kind} "{name}" is invalid: metadata.name: '
                           "Invalid value: a lowercase RFC 1123 subdomain must consist of "
                           "lower case alphanumeric characters, '-' or '.'")
        key = (namespace if namespaced else "", name)
        with self.lock:
            if key in self.objects[gp]:
                raise ApiError(409, "AlreadyExists",
                               f'{plural_kind(gp)} "{name}" already exists')
            meta.update(uid=str(uuid.uuid4()), creationTimestamp=rfc3339(self.clock()),
                        generation=1)
            if namespaced:
                meta["namespace"] = namespace
            self.bump(obj)
            self.objects[gp][key] = obj
        return obj

    def find(self, gp: tuple[str, str], namespace: str, name: str) -> dict[str, Any] | None:
        namespaced = RESOURCES[gp][1]
        with self.lock:
            return self.objects[gp].get((namespace if namespaced else "", name))

    def get(self, gp: tuple[str, str], namespace: str, name: str) -> dict[str, Any]:
        obj = self.find(gp, namespace, name)
        if obj is None:
            raise ApiError(404, "NotFound", f'{plural_kind(gp)} "{name}" not found')
        return obj

    def list(self, gp: tuple[str, str], namespace: str | None = None,
             label_selector: str | None = None, field_selector: str | None = None
             ) -> list[dict[str, Any]]:
        with self.lock:
            items = [o for (ns, _), o in self.objects[gp].items()
                     if (not namespace or ns == namespace) and matches_labels(o, label_selector)
                     and matches_fields(o, field_selector)]
        return sorted(items, key=lambda o: (o["metadata"]["creationTimestamp"],
                                            int(o["metadata"]["resourceVersion"])))

    def all_objects(self) -> Iterator[tuple[tuple[str, str], dict[str, Any]]]:
        with self.lock:
            for gp, objs in self.objects.items():
                for obj in list(objs.values()):
                    yield gp, obj

    def dependents(self, uid: str) -> list[tuple[tuple[str, str], dict[str, Any]]]:
        return [(gp, o) for gp, o in self.all_objects()
                if any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or [])]

    def delete(self, gp: tuple[str, str], namespace: str, name: str,
               policy: str = "Background") -> dict[str, Any]:
        with self.lock:
            obj = self.get(gp, namespace, name)
            deps = self.dependents(obj["metadata"]["uid"])
            if policy == "Foreground" and deps and self.foreground_linger:
                obj["metadata"].setdefault("deletionTimestamp", rfc3339(self.clock()))
                obj["metadata"]["finalizers"] = ["foregroundDeletion"]
                self.bump(obj)
                return obj
            self._remove(gp, obj, cascade=policy != "Orphan")
            return obj

    def _remove(self, gp: tuple[str, str], obj: dict[str, Any], cascade: bool) -> None:
        meta = obj["metadata"]
        self.objects[gp].pop((meta.get("namespace", ""), meta["name"]), None)
        for dep_gp, dep in self.dependents(meta["uid"]):
            if cascade:
                self._remove(dep_gp, dep, cascade=True)
            else:
                dep["metadata"]["ownerReferences"] = [
                    r for r in dep["metadata"]["ownerReferences"] if r.get("uid") != meta["uid"]]

    def finalize_deletions(self) -> int:
        """Finish lingering Foreground deletions (as the garbage collector would)."""
        done = 0
        for gp, obj in list(self.all_objects()):
            if "foregroundDeletion" in (obj["metadata"].get("finalizers") or []):
                with self.lock:
                    self._remove(gp, obj, cascade=True)
                done += 1
        return done


def plural_kind(gp: tuple[str, str]) -> str:
    group, plural = gp
    return f"{plural}.{group}" if group else plural


def owner_ref(obj: dict[str, Any], api_version: str, kind: str) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
