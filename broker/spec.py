"""The one workload spec: what a researcher asks for, independent of where it runs.

The web form, the REST API, the placement library and every backend read this one
dataclass.  Mapping it onto a control plane's objects lives in that backend's module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Any, Callable, Mapping

from broker.topology_names import LEVEL_RE, MODES
from portal.tenancy.errors import DomainError

PRIORITIES = ("low", "normal", "high")
CLASS_NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$")
PARTITIONING_WHOLE = "whole"
# what a job asking for GPU shares (``gpu_share``) matches: a pool whose units are shares of a
# GPU (Kubernetes time-slicing or MPS replicas, Slurm gres/shard), never whole GPUs or MIG
PARTITIONING_SHARED = "shared"
SHARED_PARTITIONINGS = ("time-slicing", "mps", "shard", "shared")


def partitioning_serves(offered: str, asked: str) -> bool:
    """A pool of ``offered`` units serves a job asking for ``asked`` (``spec.partitioning``):
    the same MIG profile, whole GPUs for whole GPUs, any kind of share for a share."""
    offered, asked = offered.lower(), asked.lower()
    return offered == asked or (asked == PARTITIONING_SHARED and offered in SHARED_PARTITIONINGS)


# NVIDIA MIG profile names: "<slices>g.<memory>gb", e.g. 1g.10gb, 3g.40gb, 7g.80gb.
MIG_PROFILE_RE = re.compile(r"^[1-7]g\.\d{1,3}gb$")
BROKER_FIELDS = frozenset({"exclude_nodes"})  # dispatch fills them in; a job may not
NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,50}[a-z0-9])?$")


class SpecError(DomainError, ValueError):
    """Invalid workload spec; ``errors`` maps each field name to its messages."""

    def __init__(self, errors: dict[str, list[str]]):
        self.errors = errors
        text = "; ".join(f"{k}: {' '.join(v)}" for k, v in sorted(errors.items()))
        super().__init__(text)

    def field_messages(self) -> dict[str, list[str]]:
        return {str(k): [str(m) for m in v] for k, v in self.errors.items()}


@dataclass(frozen=True)
class WorkloadSpec:
    project: str
    name: str
    command: str
    gpus_per_worker: int = 1
    workers: int = 1
    gpu_class: str = ""
    gpu_models: tuple[str, ...] = ()
    image: str = ""
    min_gpu_memory_gb: int = 0
    mig_profile: str = ""
    # each of gpus_per_worker is then a share of a GPU, not a whole one: a time-slicing or MPS
    # replica on Kubernetes, a gres/shard on Slurm; charged the share (a pool's units per GPU)
    gpu_share: bool = False
    cpus_per_worker: int = 4
    memory_gb_per_worker: int = 16
    time_limit_minutes: int = 60
    data_location: str = ""
    data_size_gb: float = 0.0
    residency: tuple[str, ...] = ()
    same_interconnect: bool = False
    # a topology level the gang's workers share (``broker.topology_names``): ``host``, ``rack``,
    # ``block`` or a cluster's own level name; ``topology_mode`` says whether a cluster where
    # they cannot is ruled out ("required") or ranked after those where they can ("preferred")
    topology_level: str = ""
    topology_mode: str = ""
    priority: str = "normal"
    # a fleet priority class of the policy (``priority_classes``): at submission it sets
    # ``priority`` to the class's level and names, per control plane, what the job runs at
    priority_class: str = ""
    checkpointable: bool = False
    # a pre-flight check on every worker before the command (``broker.preflight``): the count
    # of GPUs the worker sees, or ``gpu_check_command``; a failure places the job again
    gpu_check: bool = False
    gpu_check_command: str = ""
    off_peak: bool = False  # start only in a site's off-peak window (broker.placement.off_peak)
    # set by the broker at dispatch, never by a job: nodes of the destination it holds back
    # (``selectors.node_blocks``), which the backend tells the scheduler to avoid
    exclude_nodes: tuple[str, ...] = ()

    @property
    def total_gpus(self) -> int:
        return self.gpus_per_worker * self.workers

    @property
    def one_domain(self) -> bool:
        """The workers must share one interconnect domain (a single worker always does)."""
        return self.same_interconnect and self.workers > 1

    @property
    def level_required(self) -> str:
        """The topology level every worker must share, or "" (a single worker always does)."""
        required = self.topology_mode in ("", "required")  # a level named alone is required
        return self.topology_level if required and self.workers > 1 else ""

    @property
    def level_preferred(self) -> str:
        """The topology level the workers should share where a cluster can keep them so, or ""."""
        return self.topology_level if self.topology_mode == "preferred" and self.workers > 1 else ""

    @property
    def partitioning(self) -> str:
        return PARTITIONING_SHARED if self.gpu_share else self.mig_profile or PARTITIONING_WHOLE

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "WorkloadSpec":
        """Build and validate a spec; raises SpecError naming every bad field."""
        return validate_spec(data)


_INT_LIMITS: dict[str, tuple[int, int]] = {
    "gpus_per_worker": (1, 16),
    "workers": (1, 512),
    "min_gpu_memory_gb": (0, 1024),
    "cpus_per_worker": (1, 512),
    "memory_gb_per_worker": (1, 8192),
    "time_limit_minutes": (1, 60 * 24 * 30),
}


def _as_int(name: str, raw: Any, errors: dict[str, list[str]]) -> int | None:
    if isinstance(raw, bool):
        errors.setdefault(name, []).append("must be a whole number.")
        return None
    try:
        value = int(raw)
    except (TypeError, ValueError):
        errors.setdefault(name, []).append("must be a whole number.")
        return None
    if isinstance(raw, float) and raw != value:
        errors.setdefault(name, []).append("must be a whole number.")
        return None
    low, high = _INT_LIMITS[name]
    if not low <= value <= high:
        errors.setdefault(name, []).append(f"must be between {low} and {high}.")
        return None
    return value


def _as_str_tuple(name: str, raw: Any, errors: dict[str, list[str]]) -> tuple[str, ...]:
    if raw is None or raw == "":
        return ()
    if isinstance(raw, str):
        raw = raw.split(",")
    if not isinstance(raw, (list, tuple)) or not all(isinstance(item, str) for item in raw):
        errors.setdefault(name, []).append("must be a list of text, or text separated by commas.")
        return ()
    if len(raw) > 50 or any(len(item) > 200 for item in raw):
        errors.setdefault(name, []).append("at most 50 entries of at most 200 characters.")
        return ()
    return tuple(item.strip() for item in raw if item.strip())


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


def _as_bool(name: str, raw: Any, errors: dict[str, list[str]]) -> bool:
    if raw is None or isinstance(raw, bool) or (isinstance(raw, int) and raw in (0, 1)):
        return bool(raw)
    word = raw.strip().lower() if isinstance(raw, str) else None
    if word not in _TRUE + _FALSE:
        errors.setdefault(name, []).append("must be true or false.")
        return False
    return word in _TRUE


def _text(name: str, raw: Any, errors: dict[str, list[str]], limit: int) -> str:
    if raw is None:
        return ""
    if not isinstance(raw, str):
        errors.setdefault(name, []).append("must be text.")
        return ""
    if len(raw) > limit:
        errors.setdefault(name, []).append(f"must be at most {limit} characters.")
    if "\x00" in raw:
        errors.setdefault(name, []).append("must not contain NUL characters.")
    return raw.strip()


def validate_spec(data: Mapping[str, Any]) -> WorkloadSpec:
    errors: dict[str, list[str]] = {}
    known = {f.name for f in fields(WorkloadSpec)}
    for extra in sorted(set(data) - known):
        errors.setdefault(extra, []).append("is not a workload spec field.")
    for name in sorted(set(data) & BROKER_FIELDS):
        if data[name] not in (None, "", [], ()):
            errors.setdefault(name, []).append("is set by the broker at dispatch, not by a job.")
    values: dict[str, Any] = {}
    for name in (
        "project",
        "name",
        "command",
        "image",
        "gpu_class",
        "mig_profile",
        "data_location",
        "priority",
        "priority_class",
        "topology_level",
        "topology_mode",
        "gpu_check_command",
    ):
        values[name] = _text(name, data.get(name), errors, 4000 if name in ("command", "gpu_check_command") else 200)
    for name in _INT_LIMITS:
        if name in data and data[name] not in (None, ""):
            values[name] = _as_int(name, data[name], errors)
    values["gpu_models"] = _as_str_tuple("gpu_models", data.get("gpu_models"), errors)
    values["residency"] = _as_str_tuple("residency", data.get("residency"), errors)
    for name in ("same_interconnect", "checkpointable", "off_peak", "gpu_check", "gpu_share"):
        values[name] = _as_bool(name, data.get(name, False), errors)
    values["data_size_gb"] = _data_size(data.get("data_size_gb"), errors)
    _check_semantics(values, errors)
    if errors:
        raise SpecError(errors)
    clean = {
        k: v
        for k, v in values.items()
        if v is not None and (v != "" or k in ("gpu_class", "image", "mig_profile", "data_location"))
    }
    clean.setdefault("priority", "normal")
    if not clean["priority"]:
        clean["priority"] = "normal"
    return WorkloadSpec(**clean)


def _data_size(raw: Any, errors: dict[str, list[str]]) -> float:
    if raw in (None, ""):
        return 0.0
    try:
        value = float(raw)
    except (TypeError, ValueError):
        errors.setdefault("data_size_gb", []).append("must be a number.")
        return 0.0
    if not 0 <= value <= 1_000_000 or value != value:
        errors.setdefault("data_size_gb", []).append("must be between 0 and 1000000.")
        return 0.0
    return value


def _check_semantics(values: dict[str, Any], errors: dict[str, list[str]]) -> None:
    def err(name: str, msg: str) -> None:
        errors.setdefault(name, []).append(msg)

    if not values.get("project"):
        err("project", "is required.")
    name = values.get("name", "")
    if not name:
        err("name", "is required.")
    elif not NAME_RE.match(name):
        err(
            "name",
            "use lower-case letters, digits and '-', at most 52 characters, "
            "starting and ending with a letter or digit.",
        )
    if not values.get("command"):
        err("command", "is required.")
    if not values.get("gpu_class") and not values.get("gpu_models"):
        err("gpu_class", "choose a GPU class or list the accepted GPU models.")
    mig = values.get("mig_profile", "")
    if mig and not MIG_PROFILE_RE.match(mig):
        err("mig_profile", "must be a MIG profile such as 1g.10gb or 3g.40gb, or empty for whole GPUs.")
    if mig and (values.get("gpus_per_worker") or 1) > 7:
        err("gpus_per_worker", "at most 7 MIG slices fit on one GPU.")
    if mig and values.get("gpu_share"):
        err("gpu_share", "a share of a GPU or a MIG slice, not both: clear mig_profile or gpu_share.")
    if values.get("priority") and values["priority"] not in PRIORITIES:
        err("priority", f"must be one of {', '.join(PRIORITIES)}.")
    if values.get("priority_class") and not CLASS_NAME_RE.match(values["priority_class"]):
        err("priority_class", "a priority class name: lower-case letters, digits and '-', at most 40 characters.")
    _check_topology(values, err)
    if values.get("gpu_check_command") and not values.get("gpu_check"):
        err("gpu_check_command", "runs only as the pre-flight check: set gpu_check too.")


def _check_topology(values: dict[str, Any], err: Callable[[str, str], None]) -> None:
    level, mode = values.get("topology_level", ""), values.get("topology_mode", "")
    if mode and mode not in MODES:
        err("topology_mode", f"must be one of {', '.join(MODES)}.")
    if not level:
        if mode:
            err("topology_mode", "name the level too (topology_level: host, rack, block or the cluster's own).")
        return
    if not LEVEL_RE.match(level):
        err("topology_level", "a level name: host, rack, block, or a cluster's own such as tier 2 or a node label.")
    elif (values.get("workers") or 1) < 2:
        err("topology_level", "a single worker always shares every level with itself: ask it of a gang of 2 or more.")
    elif values.get("same_interconnect"):
        err("topology_level", "ask for one interconnect domain (same_interconnect) or a topology level, not both.")
    if not mode:
        values["topology_mode"] = "required"
