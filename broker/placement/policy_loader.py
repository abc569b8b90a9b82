"""Load a placement policy from YAML text, with errors that name the offending key.

The file is policy-as-code kept in the repository; ``policy_version`` hashes its exact
text so every placement decision can record which policy it was made under.
"""

from __future__ import annotations

import hashlib
from datetime import time
from decimal import Decimal
from typing import Mapping
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml

from broker.placement.facts import LOCATIONS
from broker.spec import PRIORITIES
from broker.placement.budgets import Budget
from broker.placement.burst import Burst
from broker.placement.off_peak import OffPeak, Window
from broker.placement.preemption import OWNERS, Preemption
from broker.placement.priority_classes import PLANES, PriorityClass
from broker.placement.policy import (
    PRESETS,
    TERMS,
    Aging,
    GpuClass,
    MultiKueueDispatch,
    Policy,
    PolicyError,
    QueueModel,
    TenantPolicy,
)

_TOP_KEYS = {
    "version",
    "description",
    "preset",
    "weights",
    "staleness_limit_s",
    "reservation_ttl_s",
    "prefer_location",
    "gpu_classes",
    "tenants",
    "queue",
    "aging",
    "autoscaling_clusters",
    "policy_hold_withdraw_s",
    "multikueue",
    "burst",
    "off_peak",
    "budgets",
    "preemption",
    "priority_classes",
}
_CLASS_KEYS = {"models", "min_memory_gb", "description"}
_TENANT_KEYS = {"gpu_classes", "regions", "min_share", "burst_gpus", "priorities", "priority_classes", "description"}


def policy_version(text: str) -> str:
    """The first 12 hex digits of the SHA-256 of the policy text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def load_policy(text: str) -> Policy:
    """Parse and validate a policy; raises PolicyError naming the key at fault."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PolicyError("(file)", f"not valid YAML: {exc}") from exc
    top = _mapping("(file)", data if data is not None else {})
    _known_keys("", top, _TOP_KEYS)
    classes = _gpu_classes(top.get("gpu_classes", {}))
    priority_classes = _priority_classes(top.get("priority_classes", {}))
    tenants = _tenants(top.get("tenants", {"*": {}}), classes, priority_classes)
    preset = _choice("preset", top.get("preset", "on-prem-first"), tuple(PRESETS))
    prefer = top.get("prefer_location")
    if prefer is not None:
        prefer = _choice("prefer_location", prefer, LOCATIONS + ("",))
    return Policy(
        gpu_classes=classes,
        tenants=tenants,
        preset=preset,
        weight_overrides=_weights(top.get("weights", {})),
        staleness_limit_s=_number("staleness_limit_s", top.get("staleness_limit_s", 300), 1),
        reservation_ttl_s=_number("reservation_ttl_s", top.get("reservation_ttl_s", 600), 1),
        queue=_queue(top.get("queue", {})),
        aging=_aging(top.get("aging", {})),
        multikueue=_multikueue(top.get("multikueue", {})),
        burst=_burst(top.get("burst", {})),
        off_peak=_off_peak(top.get("off_peak", {})),
        budgets=_budgets(top.get("budgets", []), classes),
        preemption=_preemption(top.get("preemption", {})),
        priority_classes=priority_classes,
        prefer_location=prefer,
        autoscaling=_str_list("autoscaling_clusters", top.get("autoscaling_clusters", [])),
        policy_hold_withdraw_s=_number("policy_hold_withdraw_s", top.get("policy_hold_withdraw_s", 1800), 0),
        version=policy_version(text),
    )


def load_policy_file(path: str) -> Policy:
    with open(path, encoding="utf-8") as handle:
        return load_policy(handle.read())


def _gpu_classes(raw: object) -> dict[str, GpuClass]:
    out: dict[str, GpuClass] = {}
    for name, body in _mapping("gpu_classes", raw).items():
        path = f"gpu_classes.{name}"
        body = _mapping(path, body)
        _known_keys(path, body, _CLASS_KEYS)
        if "models" not in body:
            raise PolicyError(f"{path}.models", "is required: list the member GPU models")
        models = _str_list(f"{path}.models", body["models"])
        if not models:
            raise PolicyError(f"{path}.models", "must list at least one GPU model")
        memory = int(_number(f"{path}.min_memory_gb", body.get("min_memory_gb", 0), 0))
        out[str(name)] = GpuClass(str(name), models, memory)
    return out


def _priority_classes(raw: object) -> dict[str, PriorityClass]:
    out: dict[str, PriorityClass] = {}
    for name, body in _mapping("priority_classes", raw).items():
        path = f"priority_classes.{name}"
        body = _mapping(path, body if body is not None else {})
        _known_keys(path, body, {"level", *PLANES, "description"})
        if "level" not in body:
            raise PolicyError(f"{path}.level", "is required: low, normal or high")
        try:
            out[str(name)] = PriorityClass(
                name=str(name),
                level=str(body["level"]),
                description=str(body.get("description", "")),
                **{plane: str(body.get(plane, "")) for plane in PLANES},
            )
        except ValueError as exc:
            key, _, message = str(exc).partition(": ")
            raise PolicyError(f"{path}.{key}", message) from None
    return out


def _tenants(
    raw: object, classes: Mapping[str, GpuClass], priority_classes: Mapping[str, PriorityClass]
) -> dict[str, TenantPolicy]:
    out: dict[str, TenantPolicy] = {}
    for name, body in _mapping("tenants", raw).items():
        path = f"tenants.{name}"
        body = _mapping(path, body if body is not None else {})
        _known_keys(path, body, _TENANT_KEYS)
        allowed = _str_list(f"{path}.gpu_classes", body.get("gpu_classes", ["*"]))
        for gpu_class in allowed:
            if gpu_class != "*" and gpu_class not in classes:
                raise PolicyError(f"{path}.gpu_classes", f"unknown GPU class {gpu_class!r}; define it in gpu_classes")
        out[str(name)] = TenantPolicy(
            name=str(name),
            gpu_classes=allowed,
            regions=_str_list(f"{path}.regions", body.get("regions", ["*"])),
            min_share=_number(f"{path}.min_share", body.get("min_share", 0), 0, 1),
            burst_gpus=int(_number(f"{path}.burst_gpus", body.get("burst_gpus", 0), 0)),
            priorities=_priorities(f"{path}.priorities", body.get("priorities", list(PRIORITIES))),
            priority_classes=_granted_classes(f"{path}.priority_classes", body, priority_classes),
        )
    return out


def _granted_classes(path: str, body: Mapping[str, object], known: Mapping[str, PriorityClass]) -> tuple[str, ...]:
    granted = _str_list(path, body.get("priority_classes", ["*"]))
    for name in granted:
        if name != "*" and name not in known:
            raise PolicyError(path, f"unknown priority class {name!r}; define it in priority_classes")
    return granted


def _priorities(path: str, raw: object) -> tuple[str, ...]:
    granted = _str_list(path, raw)
    for priority in granted:
        _choice(path, priority, PRIORITIES)
    return granted


def _weights(raw: object) -> dict[str, float]:
    out: dict[str, float] = {}
    for term, value in _mapping("weights", raw).items():
        if term not in TERMS:
            raise PolicyError(f"weights.{term}", f"unknown term; known: {', '.join(TERMS)}")
        out[term] = _number(f"weights.{term}", value, 0)
    return out


def _queue(raw: object) -> QueueModel:
    body = _mapping("queue", raw)
    _known_keys("queue", body, {"assumed_job_hours", "max_wait_s", "half_life_s"})
    default = QueueModel()
    return QueueModel(
        assumed_job_hours=_number(
            "queue.assumed_job_hours", body.get("assumed_job_hours", default.assumed_job_hours), 0
        ),
        max_wait_s=_number("queue.max_wait_s", body.get("max_wait_s", default.max_wait_s), 1),
        half_life_s=_number("queue.half_life_s", body.get("half_life_s", default.half_life_s), 60),
    )


def _burst(raw: object) -> Burst:
    body = _mapping("burst", raw)
    fields = ("min_onprem_wait_s", "egress_uplift", "reassess_share")
    _known_keys("burst", body, {*fields, "over_tco"})
    default = Burst()
    values = {f: _number(f"burst.{f}", body.get(f, getattr(default, f)), 0) for f in fields}
    try:
        return Burst(**values, over_tco=str(body.get("over_tco", default.over_tco)))
    except ValueError as exc:
        key, _, message = str(exc).partition(": ")
        raise PolicyError(key, message) from None


def _off_peak(raw: object) -> OffPeak:
    body = _mapping("off_peak", raw)
    _known_keys("off_peak", body, {"windows", "required_above_gpus", "required_priorities"})
    windows = tuple(
        _window(str(site), spec) for site, spec in _mapping("off_peak.windows", body.get("windows", {})).items()
    )
    above = _whole("off_peak.required_above_gpus", body.get("required_above_gpus", 0), 0)
    priorities = _priorities("off_peak.required_priorities", body.get("required_priorities", ["low", "normal"]))
    return OffPeak(windows=windows, required_above_gpus=above, required_priorities=priorities)


def _preemption(raw: object) -> Preemption:
    body = _mapping("preemption", raw)
    _known_keys("preemption", body, {"owners", "after_s", "preemptible", "max_per_workload"})
    default = Preemption()
    owners = {
        cluster: _choice(f"preemption.owners.{cluster}", owner, OWNERS)
        for cluster, owner in _mapping("preemption.owners", body.get("owners", default.owners)).items()
    }
    return Preemption(
        owners=owners,
        after_s=_number("preemption.after_s", body.get("after_s", default.after_s), 0),
        preemptible=_priorities("preemption.preemptible", body.get("preemptible", list(default.preemptible))),
        max_per_workload=int(
            _number("preemption.max_per_workload", body.get("max_per_workload", default.max_per_workload), 0)
        ),
    )


_BUDGET_KEYS = {"tenant", "project", "gpu_class", "period", "gpu_hours", "kind", "warn_share"}


def _budgets(raw: object, classes: Mapping[str, GpuClass]) -> tuple[Budget, ...]:
    if not isinstance(raw, list):
        raise PolicyError("budgets", f"must be a list of budgets, not {type(raw).__name__}")
    out: dict[tuple[str, str, str, str], Budget] = {}
    for i, item in enumerate(raw):
        budget = _budget(f"budgets[{i}]", item, classes)
        key = (budget.tenant, budget.project, budget.gpu_class, budget.period)
        if key in out:
            raise PolicyError(
                f"budgets[{i}]", f"a second budget for {budget.name}; one per tenant, project, class, period"
            )
        out[key] = budget
    return tuple(out.values())


def _budget(path: str, raw: object, classes: Mapping[str, GpuClass]) -> Budget:
    body = _mapping(path, raw)
    _known_keys(path, body, _BUDGET_KEYS)
    for key in ("tenant", "gpu_class", "gpu_hours"):
        if key not in body:
            raise PolicyError(f"{path}.{key}", "is required")
    gpu_class = str(body["gpu_class"])
    if classes and gpu_class not in classes:
        raise PolicyError(f"{path}.gpu_class", f"unknown GPU class {gpu_class!r}; known: {', '.join(classes)}")
    hours = _number(f"{path}.gpu_hours", body["gpu_hours"], 0)
    try:
        return Budget(
            tenant=str(body["tenant"]),
            project=str(body.get("project", "")),
            gpu_class=gpu_class,
            gpu_hours=Decimal(repr(hours)).quantize(Decimal("0.01")),
            period=str(body.get("period", "month")),
            kind=str(body.get("kind", "hard")),
            warn_share=_number(f"{path}.warn_share", body.get("warn_share", 0.8), 0),
        )
    except ValueError as exc:
        key, _, message = str(exc).partition(": ")
        raise PolicyError(f"{path}.{key}", message) from None


def _window(site: str, raw: object) -> Window:
    path = f"off_peak.windows.{site}"
    body = _mapping(path, raw)
    _known_keys(path, body, {"start", "end", "timezone", "weekends"})
    for key in ("start", "end"):
        if key not in body:
            raise PolicyError(f"{path}.{key}", "is required: a time of day such as '20:00'")
    zone = body.get("timezone", "UTC")
    try:
        ZoneInfo(str(zone))
    except (ZoneInfoNotFoundError, ValueError):
        raise PolicyError(
            f"{path}.timezone", f"unknown time zone {zone!r}; use a name such as 'Europe/Berlin'"
        ) from None
    weekends = _bool(f"{path}.weekends", body.get("weekends", False))
    return Window(
        site=site,
        start=_time_of_day(f"{path}.start", body["start"]),
        end=_time_of_day(f"{path}.end", body["end"]),
        timezone=str(zone),
        weekends=weekends,
    )


def _time_of_day(path: str, raw: object) -> time:
    if isinstance(raw, int):
        # YAML 1.1 reads an unquoted 20:00 as the number 1200 (minutes), and 20 stays 20
        raise PolicyError(path, f"write the time of day in quotes, as '20:00' (read {raw!r}, a number)")
    if isinstance(raw, str) and len(raw) == 5:
        try:
            return time.fromisoformat(raw)
        except ValueError:
            pass
    raise PolicyError(path, f"must be a time of day as 'HH:MM', not {raw!r}")


def _aging(raw: object) -> Aging:
    body = _mapping("aging", raw)
    default = Aging()
    fields = (
        "boost_per_hour",
        "max_boost",
        "big_gang_gpus",
        "hold_after_s",
        "min_share_bonus",
        "queue_weight_per_hour",
    )
    _known_keys("aging", body, {*fields, "queue_after_s", "move_queued", "move_past_queue_after_s", "max_moves"})
    values = {f: _number(f"aging.{f}", body.get(f, getattr(default, f)), 0) for f in fields}
    big_gang = int(values.pop("big_gang_gpus"))
    after = _optional_number("aging.queue_after_s", body.get("queue_after_s", default.queue_after_s), 0)
    move = _bool("aging.move_queued", body.get("move_queued", default.move_queued))
    raw_past = body.get("move_past_queue_after_s", default.move_past_queue_after_s)
    past = _optional_number("aging.move_past_queue_after_s", raw_past, 0)
    max_moves = _whole("aging.max_moves", body.get("max_moves", default.max_moves), 0)
    return Aging(
        big_gang_gpus=big_gang,
        queue_after_s=after,
        move_queued=move,
        move_past_queue_after_s=past,
        max_moves=max_moves,
        **values,
    )


def _multikueue(raw: object) -> MultiKueueDispatch:
    body = _mapping("multikueue", raw)
    _known_keys("multikueue", body, {"admission_timeout_s", "nominate"})
    default = MultiKueueDispatch()
    timeout = _number("multikueue.admission_timeout_s", body.get("admission_timeout_s", default.admission_timeout_s), 1)
    # Kueue keeps at most 20 names in status.nominatedClusterNames
    count = _whole("multikueue.nominate", body.get("nominate", default.nominate), 1, 20)
    return MultiKueueDispatch(admission_timeout_s=timeout, nominate=count)


def _mapping(path: str, raw: object) -> dict[str, object]:
    if not isinstance(raw, Mapping):
        raise PolicyError(path, f"must be a mapping, not {type(raw).__name__}")
    return {str(k): v for k, v in raw.items()}


def _known_keys(path: str, body: Mapping[str, object], allowed: set[str]) -> None:
    for key in sorted(set(body) - allowed):
        full = f"{path}.{key}" if path else key
        raise PolicyError(full, f"unknown key; expected one of {', '.join(sorted(allowed))}")


def _optional_number(path: str, raw: object, low: float) -> float | None:
    """``_number``, or None where the file says null (the rule is off)."""
    return None if raw is None else _number(path, raw, low)


def _number(path: str, raw: object, low: float, high: float | None = None) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise PolicyError(path, f"must be a number, not {raw!r}")
    if raw < low or (high is not None and raw > high):
        bound = f"between {low:g} and {high:g}" if high is not None else f">= {low:g}"
        raise PolicyError(path, f"must be {bound}, not {raw!r}")
    return float(raw)


def _whole(path: str, raw: object, low: float, high: float | None = None) -> int:
    number = _number(path, raw, low, high)
    if number != int(number):
        raise PolicyError(path, f"must be a whole number, not {number!r}")
    return int(number)


def _bool(path: str, raw: object) -> bool:
    if not isinstance(raw, bool):
        raise PolicyError(path, f"must be true or false, not {raw!r}")
    return raw


def _str_list(path: str, raw: object) -> tuple[str, ...]:
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not all(isinstance(v, (str, int)) for v in raw):
        raise PolicyError(path, "must be a list of names")
    return tuple(str(v) for v in raw)


def _choice(path: str, raw: object, choices: tuple[str, ...]) -> str:
    if raw not in choices:
        raise PolicyError(path, f"must be one of {', '.join(repr(c) for c in choices)}, not {raw!r}")
    return str(raw)
