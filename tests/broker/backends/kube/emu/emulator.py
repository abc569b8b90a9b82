"""A small Kubernetes API emulator over HTTP, for tests and demos without a cluster.

    emu = KubeEmulator().start()          # url in emu.url, e.g. http://127.0.0.1:40123
    emu.add_node("gpu-1", gpus=8)         # seed objects directly ...
    backend = KueueBackend("c1", KubeConfig(host=emu.url))   # ... talk HTTP to it
    emu.kueue.reconcile()                 # drive the Kueue model one step
    emu.stop()

It serves the REST paths the official client uses for core/v1 Nodes and Pods,
batch/v1 Jobs and the Kueue / Volcano custom resources: create (409
AlreadyExists on a duplicate), get, list (labelSelector, fieldSelector), delete
(propagationPolicy, owner cascade) and merge-patch/replace (also ``/status``).
Custom resources are validated against the shared CRD schemas on create.

Controllers do not run by themselves: tests call ``emu.kueue`` /
``emu.volcano`` hooks so every step is deterministic.  Faults:
``set_fault("error500" | "slow" | "lost_reply" | "refuse" | None, times=, methods=)``.
"""
from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.broker.backends.kube.emu import validation
from broker.backends.kube.common import (
    COUNT_LABEL, GPU_RESOURCE, MEMORY_LABEL, MIG_STRATEGY_LABEL, PRODUCT_LABEL)
from tests.broker.backends.kube.emu.emulator_kueue import KueueModel
from tests.broker.backends.kube.emu.emulator_store import RESOURCES, ApiError, Store
from tests.broker.backends.kube.emu.emulator_volcano import VolcanoModel

FAULTS = ("error500", "slow", "lost_reply", "refuse")


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    """RFC 7386 JSON merge patch (also used for strategic-merge requests)."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = value


# the API groups (beyond the core one) and the versions a fresh emulator serves
SERVED = {"batch": ("v1",), "kueue.x-k8s.io": ("v1beta2", "v1beta1"), "scheduling.volcano.sh": ("v1beta1",)}
TEXT = "__text__"  # a handler's answer that is plain text (a pod log), not a JSON object


def _route(path: str) -> tuple[tuple[str, str], str, str, str]:
    """URL path -> ((group, plural), namespace, name, subresource)."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        raise ApiError(404, "NotFound", f"the server could not find the requested resource {path}")
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not rest or (group, rest[0]) not in RESOURCES:
        raise ApiError(404, "NotFound", f"the server could not find the requested resource {path}")
    return (group, rest[0]), namespace, (rest[1] if len(rest) > 1 else ""), \
        (rest[2] if len(rest) > 2 else "")


class KubeEmulator:
    """The emulated API server plus the Kueue and Volcano controller models."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, validate: bool = True):
        self.host, self.port = host, port
        self.validate = validate
        self._offset = timedelta()
        self._frozen: datetime | None = None
        self.store = Store(self.now)
        self.kueue = KueueModel(self)
        self.volcano = VolcanoModel(self)
        self.slow_seconds = 2.0
        self.requests: list[tuple[str, str]] = []  # (method, path) log for assertions
        self.impersonated: list[tuple[str, str, str]] = []  # (method, path, Impersonate-User)
        self.pod_logs: dict[tuple[str, str], str] = {}  # (namespace, pod) -> what it printed
        # group -> the versions served; a test narrows one, as Kueue v0.20 drops v1beta1
        self.served: dict[str, tuple[str, ...]] = dict(SERVED)
        self._fault: str | None = None
        self._fault_left: int | None = None
        self._fault_methods: tuple[str, ...] = ()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle ------------------------------------------------------------------
    def start(self) -> "KubeEmulator":
        handler = type("Handler", (_Handler,), {"emu": self})
        self._server = ThreadingHTTPServer((self.host, self.port), handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]  # keep the port across "refuse" faults
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,),
                                        daemon=True,
                                        name=f"kube-emulator-{self.port}")
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __enter__(self) -> "KubeEmulator":
        return self.start() if self._server is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- time and faults ------------------------------------------------------------
    def now(self) -> datetime:
        base = self._frozen or datetime.now(timezone.utc).replace(microsecond=0)
        return base + self._offset

    def freeze(self, at: datetime | None) -> None:
        """Stop the emulated clock at ``at`` (None: follow the wall clock again)."""
        self._frozen = at

    def advance(self, seconds: float) -> None:
        """Move the emulated clock forward (admission-to-finish durations in tests)."""
        self._offset += timedelta(seconds=seconds)

    def set_fault(self, mode: str | None, *, times: int | None = None,
                  methods: tuple[str, ...] = ()) -> None:
        """Inject a fault for the next ``times`` requests (None: until cleared).

        "refuse" closes the listening socket (connection refused) until cleared.
        """
        if mode is not None and mode not in FAULTS:
            raise ValueError(f"unknown fault {mode!r}; one of {FAULTS}")
        if mode == "refuse":
            self.stop()
        elif self._fault == "refuse" and self._server is None:
            self.start()
        self._fault, self._fault_left, self._fault_methods = mode, times, methods

    def take_fault(self, method: str) -> str | None:
        with self.store.lock:
            if not self._fault or (self._fault_methods and method not in self._fault_methods):
                return None
            mode = self._fault
            if self._fault_left is not None:
                self._fault_left -= 1
                if self._fault_left <= 0:
                    self._fault, self._fault_left = None, None
            return mode

    # ---- REST semantics -------------------------------------------------------------
    def handle(self, method: str, path: str, query: dict[str, str],
               body: Any) -> tuple[int, dict[str, Any]]:
        if method == "GET" and path.rstrip("/") == "/apis":
            return 200, self._discovery()
        parts = [p for p in path.split("/") if p]
        if parts[:1] == ["apis"] and len(parts) >= 3 and parts[2] not in self.served.get(parts[1], (parts[2],)):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        gp, namespace, name, sub = _route(path)
        kind, _ = RESOURCES[gp]
        self.requests.append((method, path))
        if method == "GET" and gp == ("", "pods") and sub == "log":
            self.store.get(gp, namespace, name)  # 404 once the pod is gone
            return 200, {TEXT: self.pod_logs.get((namespace, name), "")}
        if method == "GET" and not name:
            items = self.store.list(gp, namespace or None, query.get("labelSelector"),
                                    query.get("fieldSelector"))
            return 200, {"apiVersion": "v1", "kind": f"{kind}List", "items": items,
                         "metadata": {"resourceVersion": self.store.resource_version}}
        if method == "GET":
            return 200, self.store.get(gp, namespace, name)
        if method == "POST" and not name:
            return 201, self.create(gp, namespace, body or {})
        if method == "DELETE" and name:
            policy = query.get("propagationPolicy") or (body or {}).get("propagationPolicy")
            return 200, self.store.delete(gp, namespace, name, policy or "Background")
        if method in ("PATCH", "PUT") and name:
            return 200, self._update(gp, namespace, name, sub, body or {}, method == "PUT")
        raise ApiError(405, "MethodNotAllowed", f"{method} is not supported on {path}")

    def _discovery(self) -> dict[str, Any]:
        """``GET /apis``: the APIGroupList of the groups still served."""
        groups = [{"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                   "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]}}
                  for g, vs in self.served.items() if vs]
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def create(self, gp: tuple[str, str], namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Validate (schemas, webhooks) and store; also used to seed objects."""
        if self.validate:
            self._validate(gp, obj)
        if gp == ("batch.volcano.sh", "jobs"):
            self.volcano.admit_webhook(obj)
        obj.setdefault("status", {})
        return self.store.create(gp, namespace, obj)

    def _validate(self, gp: tuple[str, str], obj: dict[str, Any]) -> None:
        kind, _ = RESOURCES[gp]
        errors: list[str] = []
        if gp[0] not in ("", "batch"):
            errors = validation.manifest_errors(obj)
        elif gp == ("batch", "jobs"):
            containers = (((obj.get("spec") or {}).get("template") or {}).get("spec") or {}) \
                .get("containers")
            if not containers:
                errors = ["spec.template.spec.containers: Required value"]
            if len((obj.get("metadata") or {}).get("name", "")) > 63:
                errors.append("metadata.name: must be no more than 63 characters")
        if errors:
            name = (obj.get("metadata") or {}).get("name", "")
            raise ApiError(422, "Invalid", f'{kind}.{gp[0] or "core"} "{name}" is invalid: '
                           + "; ".join(errors))

    def _update(self, gp: tuple[str, str], namespace: str, name: str, sub: str,
                body: dict[str, Any], replace: bool) -> dict[str, Any]:
        with self.store.lock:
            obj = self.store.get(gp, namespace, name)
            if sub == "status":
                if replace:
                    obj["status"] = body.get("status") or {}
                else:
                    _merge(obj.setdefault("status", {}), body.get("status") or {})
            elif replace:
                keep = {k: obj["metadata"][k] for k in ("uid", "creationTimestamp", "namespace")
                        if k in obj["metadata"]}
                obj.clear()
                obj.update(body)
                obj.setdefault("metadata", {}).update(keep)
            else:
                _merge(obj, {k: v for k, v in body.items() if k != "status"})
            self.store.bump(obj)
            return obj

    # ---- seeding helpers ------------------------------------------------------------
    def add_node(self, name: str, *, product: str = "NVIDIA-A100-SXM4-80GB", gpus: int = 8,
                 memory_mib: int = 81920, mig: dict[str, int] | None = None,
                 ready: bool = True, unschedulable: bool = False,
                 taints: list[dict[str, str]] | None = None,
                 labels: dict[str, str] | None = None) -> dict[str, Any]:
        """A GPU node as GPU feature discovery labels it; ``mig`` = {profile: count} (mixed)."""
        resources = {GPU_RESOURCE: str(gpus)} if gpus else {}
        resources.update({f"nvidia.com/mig-{p}": str(n) for p, n in (mig or {}).items()})
        node_labels = {PRODUCT_LABEL: product, MEMORY_LABEL: str(memory_mib),
                       COUNT_LABEL: str(gpus + (1 if mig else 0)),
                       "kubernetes.io/hostname": name, **(labels or {})}
        if mig:
            node_labels[MIG_STRATEGY_LABEL] = "mixed"
        node = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": node_labels},
                "spec": {"unschedulable": unschedulable, "taints": taints or []},
                "status": {"capacity": dict(resources), "allocatable": dict(resources),
                           "conditions": [{"type": "Ready",
                                           "status": "True" if ready else "False"}]}}
        return self.create(("", "nodes"), "", node)

    def add(self, group: str, plural: str, body: dict[str, Any],
            namespace: str = "") -> dict[str, Any]:
        """Seed any object (validated like a client's create)."""
        return self.create((group, plural), namespace, body)


class _Handler(BaseHTTPRequestHandler):
    emu: KubeEmulator
    # HTTP/1.0: one connection per request, so "refuse" really refuses every call.
    protocol_version = "HTTP/1.0"

    def do_GET(self) -> None:  # noqa: N802 (http.server naming)
        self._dispatch("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch("POST")

    def do_DELETE(self) -> None:  # noqa: N802
        self._dispatch("DELETE")

    def do_PATCH(self) -> None:  # noqa: N802
        self._dispatch("PATCH")

    def do_PUT(self) -> None:  # noqa: N802
        self._dispatch("PUT")

    def _dispatch(self, method: str) -> None:
        fault = self.emu.take_fault(method)
        if fault == "error500":
            err = ApiError(500, "InternalError", "etcdserver: request timed out")
            self._send(500, err.status())
            return
        split = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(split.query).items()}
        if self.headers.get("Impersonate-User"):
            self.emu.impersonated.append((method, split.path, self.headers["Impersonate-User"]))
        try:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"null") if length else None
            code, payload = self.emu.handle(method, split.path, query, body)
        except ApiError as err:
            code, payload = err.code, err.status()
        except ValueError as err:
            code, payload = 400, ApiError(400, "BadRequest", str(err)).status()
        if fault == "lost_reply":
            return  # applied, but the caller never hears back
        if fault == "slow":
            time.sleep(self.emu.slow_seconds)  # applied; the answer comes too late
        self._send(code, payload)

    def _send(self, code: int, payload: dict[str, Any]) -> None:
        text = TEXT in payload  # a pod log is plain text, as the API server sends it
        data = payload[TEXT].encode() if text else json.dumps(payload).encode()
        try:
            self.send_response(code)
            self.send_header("Content-Type", "text/plain" if text else "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass  # the client gave up (timeout): nothing to tell it

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # quiet tests
