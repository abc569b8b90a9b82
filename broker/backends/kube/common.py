"""Shared plumbing of the Kubernetes backends: client, error mapping, naming, pods.

Every API call goes through ``KubeClient.call`` so that it always carries a
timeout and every failure ends up as one of the two contract exceptions:
``Unavailable`` (5xx, 429, connection refused, timeouts: outcome unknown) or
``KubeRejected`` (other 4xx: the API server answered and said no).  Responses
are read raw and decoded as plain dicts, so the same code reads typed
resources (Job, Node) and custom resources (Workload, PodGroup) alike.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Mapping, Sequence

import urllib3
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from broker.backends.base import ProjectIdentity, Rejected, Unavailable
from broker.backends.kube.discovery import missing_api_text, served_versions
from broker.backends.kube.gpu_check import gpu_check_container
from broker.backends.kube.settings import BackendSettings
from broker.backends.json_fields import BadField, Fields, Key
from broker.spec import WorkloadSpec

GPU_RESOURCE = "nvidia.com/gpu"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
PRODUCT_LABEL = "nvidia.com/gpu.product"
MEMORY_LABEL = "nvidia.com/gpu.memory"  # MiB, set by GPU feature discovery
COUNT_LABEL = "nvidia.com/gpu.count"
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
SHARED_RESOURCE = "nvidia.com/gpu.shared"  # time-sliced or MPS replicas, renamed (inventory.py)
# GPU sharing by the NVIDIA device plugin: each GPU advertised as ``nvidia.com/gpu.replicas``
# units, under ``nvidia.com/gpu`` (the product label then ends in -SHARED) or, renamed, under
# ``SHARED_RESOURCE``; a job of shares asks ``nvidia.com/gpu`` on a node labelled shared
SHARING_LABEL = "nvidia.com/gpu.sharing-strategy"  # time-slicing, mps (none: not shared)
SHARING_STRATEGIES = ("time-slicing", "mps")
WORKLOAD_LABEL = "gpubroker.io/workload-id"
WORKLOAD_ANNOTATION = "gpubroker.io/workload-id"  # full id when the label had to be shortened
PROJECT_LABEL = "gpubroker.io/project"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpubroker"}
# Indexed Job / Volcano pod hostnames are "<job>-<task>-<index>" and must stay <= 63.
MAX_JOB_NAME = 47
# what loading a kubeconfig raises when the file is missing, not YAML, or not a kubeconfig
_CONFIG_ERRORS = (k8s_config.ConfigException, OSError, ValueError, TypeError, KeyError, AttributeError, yaml.YAMLError)
_LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@dataclass(frozen=True)
class KubeConfig:
    """Where a cluster's API server is and how patient to be with it.

    ``host`` wins (a proxy, the tests' emulator); otherwise ``in_cluster`` or the
    kubeconfig file at ``kubeconfig`` (empty: $KUBECONFIG / ~/.kube/config).
    """

    host: str = ""
    kubeconfig: str = ""
    context: str = ""
    in_cluster: bool = False
    verify_ssl: bool = True
    connect_timeout_s: float = 3.0
    read_timeout_s: float = 15.0
    token: str = ""  # bearer token for ``host`` (never logged)
    ca_cert: str = ""  # CA bundle path for ``host`` over https


class KubeRejected(Rejected):
    """A 4xx answer; ``status`` lets callers treat 404/409 specially."""

    def __init__(self, reason: str, raw: str = "", status: int = 0):
        super().__init__(reason, raw)
        self.status = status


class KubeClient:
    """The official client, built lazily, with every call bounded and mapped."""

    def __init__(self, config: KubeConfig):
        self.config = config
        self._api: k8s.ApiClient | None = None
        self._lock = threading.Lock()  # Celery threads may share one backend

    @property
    def timeout(self) -> tuple[float, float]:
        return (self.config.connect_timeout_s, self.config.read_timeout_s)

    def _client(self) -> k8s.ApiClient:
        with self._lock:
            if self._api is None:
                try:
                    self._api = k8s.ApiClient(_configuration(self.config))
                except _CONFIG_ERRORS as exc:
                    # A broken kubeconfig is reported (cluster stale), not raised at start-up.
                    where = self.config.kubeconfig or "$KUBECONFIG / ~/.kube/config"
                    raise Unavailable(
                        f"malformed or unreadable kubeconfig {where}: {type(exc).__name__}: {exc}"
                    ) from exc
            return self._api

    @property
    def where(self) -> str:
        """The API server's URL for messages (known once the client is built)."""
        if self.config.host:
            return self.config.host
        return self._api.configuration.host if self._api is not None else "cluster"

    def core(self) -> k8s.CoreV1Api:
        return k8s.CoreV1Api(self._client())

    def batch(self) -> k8s.BatchV1Api:
        return k8s.BatchV1Api(self._client())

    def custom(self) -> k8s.CustomObjectsApi:
        return k8s.CustomObjectsApi(self._client())

    def version(self) -> str:
        """The API server's version ("v1.36.0")."""
        info = self.call(k8s.VersionApi(self._client()).get_code) or {}
        return str(info.get("gitVersion") or "?")

    def call(
        self,
        fn: Callable[..., Any],
        *args: Any,
        missing_ok: bool = False,
        headers: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any] | None:
        """Run one API method; return the decoded body (None for 404 if missing_ok).
        ``headers``: added to this request only (user impersonation)."""
        if headers:
            kwargs["_headers"] = dict(headers)
        try:
            resp = fn(*args, _preload_content=False, _request_timeout=self.timeout, **kwargs)
        except ApiException as exc:
            if missing_ok and exc.status == 404:
                return None
            raise translate_api_exception(exc, self.where) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            # connection refused, read timeout, reset, TLS: the outcome is unknown
            raise Unavailable(transport_text(exc, self.where)) from exc
        try:
            return json.loads(resp.data or b"{}")
        except ValueError as exc:
            raise Unavailable(f"kubernetes API answered with something not JSON: {exc}") from exc

    def items(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        """A list call.  Any 4xx means this cluster can't be read (resource not served: a CRD
        missing; credentials refused): Unavailable, so the cluster is stale, not a crash."""
        try:
            body = self.call(fn, *args, **kwargs) or {}
        except KubeRejected as exc:
            what = resource_text(fn, args)
            if exc.status == 404:
                missing = (
                    self._missing_text(fn, args) or f"CRD missing: the API server {self.where} does not serve {what}"
                )
                raise Unavailable(f"{missing} ({exc})") from exc
            raise Unavailable(f"cannot list {what} on {self.where}: {exc}") from exc
        return list(body.get("items") or [])

    def _missing_text(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> str:
        """For a custom-object list that answered 404: which API is missing, said from the
        server's discovery document ("" for any other call)."""
        parts = custom_object_parts(fn, args)
        if parts is None:
            return ""
        group, version, plural = parts
        try:
            served: tuple[str, ...] | None = served_versions(
                self.call(k8s.ApisApi(self._client()).get_api_versions), group
            )
        except (Unavailable, Rejected):
            served = None  # discovery failed too: the plain "does not serve" text
        return missing_api_text(self.where, plural, group, version, served)

    def close(self) -> None:
        with self._lock:
            if self._api is not None:
                self._api.close()
                self._api = None


def impersonation_headers(identity: ProjectIdentity) -> dict[str, str]:
    """Act as the person (``Impersonate-User``) when their Kubernetes user is known; the
    broker's own credentials need the ``impersonate`` verb on users for the API server to
    accept it, and the person's RBAC then decides whether the object may be created."""
    return {"Impersonate-User": identity.k8s_user} if identity.k8s_user else {}


def _configuration(cfg: KubeConfig) -> k8s.Configuration:
    conf = k8s.Configuration()
    if cfg.host:
        conf.host = cfg.host
        if cfg.token:
            conf.api_key = {"authorization": f"Bearer {cfg.token}"}
        if cfg.ca_cert:
            conf.ssl_ca_cert = cfg.ca_cert
    elif cfg.in_cluster:
        k8s_config.load_incluster_config(client_configuration=conf)
    else:
        k8s_config.load_kube_config(
            config_file=cfg.kubeconfig or None, context=cfg.context or None, client_configuration=conf
        )
    conf.verify_ssl = cfg.verify_ssl if cfg.host else conf.verify_ssl
    # One quick retry on connect only: a request that reached the server is never
    # repeated by the transport (POST is made idempotent by us, via 409 adoption).
    conf.retries = urllib3.Retry(total=1, connect=1, read=0, redirect=0, status=0, other=0)
    return conf


def translate_api_exception(exc: ApiException, where: str = "") -> Exception:
    status = int(exc.status or 0)
    body = exc.body if isinstance(exc.body, str) else ""
    message = _status_message(body) or str(exc.reason or "")
    text = f"HTTP {status}: {message}"
    if status == 401:
        # the token expired or the client certificate is not trusted: no call can succeed
        return Unavailable(
            f"credentials rejected by the API server {where or ''} (expired or invalid token): {text}".replace(
                "  ", " "
            )
        )
    if status == 0 or status >= 500 or status in (408, 429):
        return Unavailable(f"kubernetes API: {text}")
    return KubeRejected(text, raw=body or text, status=status)


def transport_text(exc: BaseException, where: str) -> str:
    """Say which: no answer in time, or no connection at all."""
    reason = getattr(exc, "reason", None) or exc
    if isinstance(reason, urllib3.exceptions.ReadTimeoutError) or "Read timed out" in str(exc):
        return f"API server {where} did not answer in time: {exc}"
    return f"API server {where} unreachable: {exc}"


def custom_object_parts(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[str, str, str] | None:
    """(group, version, plural) of a custom-object call, else None."""
    if getattr(fn, "__name__", "").endswith("custom_object") and len(args) >= 3:
        return str(args[0]), str(args[1]), str(args[-1])
    return None


def resource_text(fn: Callable[..., Any], args: tuple[Any, ...]) -> str:
    """ "workloads.kueue.x-k8s.io/v1beta2" for a custom-object list, else the method name."""
    parts = custom_object_parts(fn, args)
    if parts:
        group, version, plural = parts
        return f"{plural}.{group}/{version}"
    return getattr(fn, "__name__", "resource")


def _status_message(body: str) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return body[:500]
    if not isinstance(data, dict):
        return body[:500]
    return " ".join(x for x in (data.get("reason", ""), data.get("message", "")) if x)


# ---- names and labels ---------------------------------------------------------------


def _short_hash(text: str, n: int = 8) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def dns_name(*parts: str, limit: int = MAX_JOB_NAME) -> str:
    """A deterministic DNS-1123 label from ``parts`` (the same input, the same name).

    Determinism matters: a retried submit must hit the same name and get a 409.
    """
    raw = "-".join(p for p in parts if p)
    base = re.sub(r"[^a-z0-9-]+", "-", raw.lower())
    base = re.sub(r"-{2,}", "-", base).strip("-") or "job"
    if base[0].isdigit():
        base = "j" + base
    if len(base) <= limit:
        return base
    return base[: limit - 9].rstrip("-") + "-" + _short_hash(raw)


def label_value(value: str) -> str:
    """``value`` if it is a valid label value, else a shortened form plus a hash."""
    if len(value) <= 63 and _LABEL_VALUE_RE.match(value):
        return value
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", value).strip("-_.")[:54].strip("-_.")
    return f"{cleaned}-{_short_hash(value)}" if cleaned else _short_hash(value, 16)


def workload_of(obj: Mapping[str, Any]) -> str | None:
    meta = Fields(obj).obj("metadata")
    return meta.obj("annotations").text(WORKLOAD_ANNOTATION) or meta.obj("labels").text(WORKLOAD_LABEL) or None


def job_ref(obj: Mapping[str, Any]) -> str:
    meta = Fields(obj).obj("metadata")
    return f"{meta.text('namespace')}/{meta.text('name')}"


def split_ref(job_id: str, default_namespace: str) -> tuple[str, str]:
    ns, _, name = job_id.rpartition("/")
    return (ns or default_namespace, name)


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def quantity(value: Any, path: Sequence[Key] = ()) -> int:
    """Integer count from a resource quantity ("4", 4, "2k"); GPUs are whole units.
    Text that is no number counts 0; one beyond any count (1e309, inf) is an error, which
    names the field at ``path`` (a ``BadField``) when the caller knows where it was read."""
    text = str(value or "0").strip()
    mult = 1
    for suffix, scale in _SCALE.items():
        if text.endswith(suffix):
            text, mult = text[: -len(suffix)], scale
            break
    try:
        amount = float(text) * mult
    except ValueError:
        return 0
    if math.isnan(amount):
        return 0
    if math.isinf(amount):
        if path:
            raise BadField(path, "a finite resource quantity", value)
        raise ValueError(f"resource quantity {str(value)[:40]!r} is not a finite number")
    return int(amount)


_SCALE = {"k": 1000, "M": 1000**2, "Ki": 1024, "Mi": 1024**2}


def condition_fields(obj: Mapping[str, Any], ctype: str) -> Fields | None:
    """The status condition of type ``ctype``, its fields type-checked as they are read."""
    for cond in Fields(obj).obj("status").objs("conditions"):
        if cond.value("type") == ctype:
            return cond
    return None


def condition(obj: Mapping[str, Any], ctype: str) -> dict[str, Any] | None:
    cond = condition_fields(obj, ctype)
    return dict(cond.raw) if cond is not None else None


def is_true(obj: Mapping[str, Any], ctype: str) -> bool:
    cond = condition_fields(obj, ctype)
    return bool(cond and cond.value("status") == "True")


# ---- the pod every GPU worker runs --------------------------------------------------


def gpu_resource(spec: WorkloadSpec) -> str:
    """Whole GPUs, or MIG slices under the device plugin's "mixed" strategy."""
    return f"{MIG_RESOURCE_PREFIX}{spec.mig_profile}" if spec.mig_profile else GPU_RESOURCE


def is_gpu_resource(name: str) -> bool:
    return name in (GPU_RESOURCE, SHARED_RESOURCE) or name.startswith(MIG_RESOURCE_PREFIX)


def pod_gpus(pod_spec: Mapping[str, Any] | Fields) -> int:
    """GPUs (or MIG slices) one pod asks for: requests, else limits (the API defaults them)."""
    spec = pod_spec if isinstance(pod_spec, Fields) else Fields(pod_spec)
    total = 0
    for container in spec.objs("containers"):
        total += sum(gpu_requests(container.obj("resources")).values())
    return total


def gpu_requests(resources: Fields) -> dict[str, int]:
    """GPU resource -> devices of one container's ``resources``: requests over limits (the
    API defaults one from the other); an uncountable quantity names its field."""
    parts = (resources.obj("limits"), resources.obj("requests"))
    merged = {name: (value, part.at(name)) for part in parts for name, value in part.raw.items()}
    return {name: quantity(value, path) for name, (value, path) in merged.items() if is_gpu_resource(name)}


def accepted_products(spec: WorkloadSpec, settings: BackendSettings) -> list[str]:
    """Node label values of nvidia.com/gpu.product the spec accepts ([] = any)."""
    models = list(spec.gpu_models) or list(settings.gpu_classes.get(spec.gpu_class, ()))
    products: list[str] = []
    for model in models:
        found = [p for p, name in settings.model_names.items() if name == model]
        # GPU feature discovery writes the NVML name with spaces as hyphens.
        products.extend(found or [model.strip().replace(" ", "-")])
    # The API server only accepts label values in selectors: drop what can't be one.
    return sorted(p for p in dict.fromkeys(products) if len(p) <= 63 and _LABEL_VALUE_RE.match(p))


def placement(spec: WorkloadSpec, settings: BackendSettings) -> dict[str, Any]:
    """nodeSelector for one GPU model; required node affinity for several, a memory floor or
    nodes to avoid."""
    products = accepted_products(spec, settings)
    exprs: list[dict[str, Any]] = []
    if len(products) > 1:
        exprs.append({"key": PRODUCT_LABEL, "operator": "In", "values": products})
    if spec.min_gpu_memory_gb and not spec.mig_profile:
        floor = spec.min_gpu_memory_gb * 1024 - 1  # label is MiB; Gt is strict
        exprs.append({"key": MEMORY_LABEL, "operator": "Gt", "values": [str(floor)]})
    if spec.gpu_share:  # replicas of a shared GPU, which carry the device plugin's sharing label
        exprs.append({"key": SHARING_LABEL, "operator": "In", "values": list(SHARING_STRATEGIES)})
    if spec.exclude_nodes:  # the nodes the broker holds back
        exprs.append({"key": "kubernetes.io/hostname", "operator": "NotIn", "values": list(spec.exclude_nodes)})
    out: dict[str, Any] = {}
    if len(products) == 1:
        out["nodeSelector"] = {PRODUCT_LABEL: products[0]}
    if exprs:
        out["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": exprs}]}
            }
        }
    return out


def worker_pod_spec(
    spec: WorkloadSpec, workload_id: str, settings: BackendSettings, restart: str = "Never"
) -> dict[str, Any]:
    limits = {
        gpu_resource(spec): str(spec.gpus_per_worker),
        "cpu": str(spec.cpus_per_worker),
        "memory": f"{spec.memory_gb_per_worker}Gi",
    }
    container = {
        "name": "worker",
        "image": spec.image or settings.default_image,
        "command": ["/bin/sh", "-c", spec.command],
        "env": [
            {"name": "GPUBROKER_WORKLOAD_ID", "value": workload_id},
            {"name": "GPUBROKER_WORKERS", "value": str(spec.workers)},
        ],
        # Extended resources need requests == limits; the API server copies them.
        "resources": {"limits": limits, "requests": {"cpu": limits["cpu"], "memory": limits["memory"]}},
    }
    pod: dict[str, Any] = {
        "restartPolicy": restart,
        "containers": [container],
        # GPU nodes are commonly tainted so that only GPU pods land there.
        "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
    }
    pod.update(placement(spec, settings))
    check = gpu_check_container(spec, container)
    if check:
        pod["initContainers"] = [check]
    return pod


def object_labels(spec: WorkloadSpec, workload_id: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    labels = {WORKLOAD_LABEL: label_value(workload_id), PROJECT_LABEL: label_value(spec.project), **MANAGED_BY}
    labels.update(extra or {})
    return labels


def object_annotations(spec: WorkloadSpec, workload_id: str, tenant: str) -> dict[str, str]:
    return {
        WORKLOAD_ANNOTATION: workload_id,
        "gpubroker.io/spec-name": spec.name,
        "gpubroker.io/tenant": tenant,
        "gpubroker.io/gpu-class": spec.gpu_class,
    }


def first(items: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The oldest object, so repeated look-ups agree on which one is "the" job."""
    ordered = sorted(items, key=lambda o: Fields(o).obj("metadata").text("creationTimestamp"))
    return ordered[0] if ordered else None
