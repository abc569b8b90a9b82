"""Validate generated manifests against the real CRD schemas (and a small Job schema).

The CRDs are verbatim copies of Kueue v0.19.2 and Volcano v1.15.1 from the pinned Go
modules that scripts/k8s-cluster runs, kept in ``data/crds`` beside these tests.
CEL rules (``x-kubernetes-validations``) are not evaluated; everything that
JSON Schema can express (types, enums, required, bounds, patterns) is.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, Mapping

import jsonschema
import yaml

_CRD_FILES = {
    "kueue.x-k8s.io": {
        "Workload": "kueue-v0.19.2/kueue.x-k8s.io_workloads.yaml",
        "ClusterQueue": "kueue-v0.19.2/kueue.x-k8s.io_clusterqueues.yaml",
        "LocalQueue": "kueue-v0.19.2/kueue.x-k8s.io_localqueues.yaml",
        "ResourceFlavor": "kueue-v0.19.2/kueue.x-k8s.io_resourceflavors.yaml",
        "MultiKueueConfig": "kueue-v0.19.2/kueue.x-k8s.io_multikueueconfigs.yaml",
        "MultiKueueCluster": "kueue-v0.19.2/kueue.x-k8s.io_multikueueclusters.yaml",
        "WorkloadPriorityClass": "kueue-v0.19.2/kueue.x-k8s.io_workloadpriorityclasses.yaml",
        "AdmissionCheck": "kueue-v0.19.2/kueue.x-k8s.io_admissionchecks.yaml",
    },
    "batch.volcano.sh": {"Job": "volcano-v1.15.1/batch.volcano.sh_jobs.yaml"},
    "scheduling.volcano.sh": {
        "PodGroup": "volcano-v1.15.1/scheduling.volcano.sh_podgroups.yaml",
        "Queue": "volcano-v1.15.1/scheduling.volcano.sh_queues.yaml",
    },
}

_NAME = {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63}
_RESOURCES = {"type": "object", "additionalProperties": {"type": "string", "pattern": r"^[0-9]"}}
_CONTAINER = {
    "type": "object",
    "required": ["name", "image"],
    "properties": {
        "name": _NAME, "image": {"type": "string", "minLength": 1},
        "command": {"type": "array", "items": {"type": "string"}},
        "resources": {"type": "object", "properties": {"limits": _RESOURCES,
                                                       "requests": _RESOURCES}},
    },
}
# batch/v1 Job has no CRD: the fields the Kueue backend relies on, checked strictly.
JOB_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "batch/v1"},
        "kind": {"const": "Job"},
        "metadata": {"type": "object", "required": ["name", "namespace", "labels"],
                     "properties": {"name": _NAME, "namespace": _NAME,
                                    "labels": {"type": "object",
                                               "required": ["kueue.x-k8s.io/queue-name"]}}},
        "spec": {
            "type": "object",
            "required": ["suspend", "completionMode", "parallelism", "completions", "template"],
            "properties": {
                "suspend": {"const": True},
                "completionMode": {"const": "Indexed"},
                "parallelism": {"type": "integer", "minimum": 1},
                "completions": {"type": "integer", "minimum": 1},
                "backoffLimit": {"type": "integer", "minimum": 0},
                "activeDeadlineSeconds": {"type": "integer", "minimum": 1},
                "template": {"type": "object", "required": ["spec"], "properties": {"spec": {
                    "type": "object", "required": ["containers", "restartPolicy"],
                    "properties": {"restartPolicy": {"enum": ["Never", "OnFailure"]},
                                   "nodeSelector": {"type": "object",
                                                    "additionalProperties": {"type": "string"}},
                                   "containers": {"type": "array", "minItems": 1,
                                                  "items": _CONTAINER}}}}},
            },
        },
    },
}


class ManifestError(ValueError):
    """A generated object does not satisfy its schema."""


CRD_DIR = Path(__file__).resolve().parents[1] / "data" / "crds"


@functools.lru_cache(maxsize=None)
def crd_schema(group: str, kind: str, version: str) -> dict[str, Any]:
    """``openAPIV3Schema`` of one served version of a CRD (cached: the Workload CRD is 1.4 MB)."""
    try:
        rel = _CRD_FILES[group][kind]
    except KeyError as exc:
        raise ManifestError(f"no CRD known for {group}/{kind}") from exc
    path = CRD_DIR / rel
    try:
        with open(path, encoding="utf-8") as fh:
            crd = yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except FileNotFoundError as exc:
        raise ManifestError(f"CRD file {path} not found") from exc
    for served in crd["spec"]["versions"]:
        if served["name"] == version:
            return _python_patterns(served["schema"]["openAPIV3Schema"])
    raise ManifestError(f"{group}/{kind} does not serve version {version}")


_INLINE_FLAGS = re.compile(r"\(\?([aiLmsux]+)\)")


def _python_patterns(node: Any) -> Any:
    """Go's RE2 allows "^(?i)..." (flags mid-pattern); Python wants flags first."""
    if isinstance(node, dict):
        out = {k: _python_patterns(v) for k, v in node.items()}
        pattern = out.get("pattern")
        if isinstance(pattern, str) and _INLINE_FLAGS.search(pattern[1:]):
            flags = "".join(_INLINE_FLAGS.findall(pattern))
            out["pattern"] = f"(?{flags})" + _INLINE_FLAGS.sub("", pattern)
        return out
    if isinstance(node, list):
        return [_python_patterns(v) for v in node]
    return node


def schema_for(obj: Mapping[str, Any]) -> dict[str, Any]:
    api_version = str(obj.get("apiVersion", ""))
    kind = str(obj.get("kind", ""))
    if api_version == "batch/v1" and kind == "Job":
        return JOB_SCHEMA
    group, _, version = api_version.rpartition("/")
    return crd_schema(group, kind, version)


def manifest_errors(obj: Mapping[str, Any]) -> list[str]:
    """Every schema violation of ``obj`` as "path: message" strings (empty when valid)."""
    validator = jsonschema.Draft202012Validator(schema_for(obj))
    return [f"{'/'.join(str(p) for p in err.absolute_path) or '<root>'}: {err.message}"
            for err in sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path))]


def validate_manifest(obj: Mapping[str, Any]) -> None:
    """Raise ManifestError listing every violation of ``obj`` against its schema."""
    errors = manifest_errors(obj)
    if errors:
        raise ManifestError(f"{obj.get('kind')} {(obj.get('metadata') or {}).get('name')}: "
                            + "; ".join(errors))
