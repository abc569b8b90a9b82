"""A calibration job list: what is submitted when, how long it runs, what it asks for.

A JSON file: ``{"name": ..., "jobs": [{...}, ...]}``, each job::

    {"name": "big-1", "at_s": 2, "gpus_per_worker": 8, "workers": 2, "run_s": 40,
     "time_limit_min": 2, "cancel_at_s": null, "local": false, "priority": "normal"}

``at_s``: seconds after the start of the run; ``run_s``: how long the job sleeps;
``time_limit_min``: its time limit (the local scheduler's backfill plans with it; a job that
runs longer is killed at it); ``cancel_at_s``: cancelled then, if given; ``local``: submitted
by a local user, not as a broker job would be (the simulator takes it as a foreign job);
``priority``: the broker's word (low, normal, high), mapped as the backend maps it (Kueue:
a WorkloadPriorityClass; preemption needs it); ``mig_profile``: MIG slices of that profile
(``1g.5gb``) instead of whole GPUs, ``gpus_per_worker`` then counting slices.
Slurm only: ``account``, the account a job runs under (its association's limits apply;
default: the run's), and ``qos``, a QoS a local job names (the broker's jobs take their
association's default QoS).
Slurm only, at the top level: ``warmup``, jobs run to their end before each repetition
(``{"account": "fs-heavy", "nodes": 2, "cpus_per_node": 16, "run_s": 10}``), so fair share
has past use to weigh; the inventory (fair-share factors included) is read after them.
Unknown fields are errors that name the job and the field, as are missing or wrong ones.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker.spec import MIG_PROFILE_RE, PRIORITIES, WorkloadSpec, validate_spec
from portal.tenancy.errors import DomainError

_FIELDS = {
    "name",
    "at_s",
    "gpus_per_worker",
    "workers",
    "run_s",
    "time_limit_min",
    "cancel_at_s",
    "local",
    "priority",
    "account",
    "qos",
    "mig_profile",
}
_REQUIRED = ("name", "at_s", "gpus_per_worker", "run_s", "time_limit_min")


class JobListError(DomainError, ValueError):
    """A job list that cannot be played: the message names the job and the field."""


@dataclass(frozen=True)
class CalibrationJob:
    name: str
    at_s: float
    gpus_per_worker: int
    workers: int
    run_s: float
    time_limit_min: int
    cancel_at_s: float | None = None
    local: bool = False
    priority: str = "normal"
    account: str = ""
    qos: str = ""
    mig_profile: str = ""  # MIG slices of this profile, not whole GPUs ("gpus" then counts slices)

    @property
    def gpus(self) -> int:
        return self.gpus_per_worker * self.workers

    def spec(self, project: str, *, gpu_models: list[str]) -> WorkloadSpec:
        """The job as the broker would ask for it (both sides submit this)."""
        return validate_spec(
            {
                "project": project,
                "name": self.name,
                "command": f"sleep {self.run_s:g}",  # kwok reads the run time from it
                "gpus_per_worker": self.gpus_per_worker,
                "workers": self.workers,
                "gpu_models": gpu_models,
                "time_limit_minutes": self.time_limit_min,
                "priority": self.priority,
                "mig_profile": self.mig_profile,
            }
        )


@dataclass(frozen=True)
class WarmupJob:
    """A job run to its end before a repetition, to give its account past use."""

    account: str
    nodes: int
    cpus_per_node: int
    run_s: float


@dataclass(frozen=True)
class JobList:
    name: str
    jobs: tuple[CalibrationJob, ...]
    warmup: tuple[WarmupJob, ...] = ()

    @property
    def span_s(self) -> float:
        """An upper bound on when the last job ends, were each run after the one before."""
        return max(j.at_s for j in self.jobs) + sum(min(j.run_s, j.time_limit_min * 60.0) for j in self.jobs)


def load(path: Path) -> JobList:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise JobListError(f"{path}: not a readable JSON job list: {exc}") from exc
    return parse(data, where=str(path))


def parse(data: Any, *, where: str = "job list") -> JobList:
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list) or not data["jobs"]:
        raise JobListError(f"{where}: expected {{'name': ..., 'jobs': [...]}} with at least one job")
    unknown = set(data) - {"name", "jobs", "about", "warmup"}
    if unknown:
        raise JobListError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    jobs = tuple(_job(raw, i, where) for i, raw in enumerate(data["jobs"]))
    warmup = data.get("warmup", [])
    if not isinstance(warmup, list):
        raise JobListError(f"{where}: warmup must be a list of jobs")
    names = [j.name for j in jobs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise JobListError(f"{where}: job names must be unique: {', '.join(twice)}")
    return JobList(
        name=str(data.get("name") or where),
        jobs=tuple(sorted(jobs, key=lambda j: (j.at_s, j.name))),
        warmup=tuple(_warmup(raw, i, where) for i, raw in enumerate(warmup)),
    )


_WARMUP_FIELDS = ("account", "nodes", "cpus_per_node", "run_s")


def _warmup(raw: Any, index: int, where: str) -> WarmupJob:
    label = f"{where}: warmup job {index + 1}"
    if not isinstance(raw, dict):
        raise JobListError(f"{label}: expected an object")
    unknown, missing = set(raw) - set(_WARMUP_FIELDS), [f for f in _WARMUP_FIELDS if f not in raw]
    if unknown:
        raise JobListError(f"{label}: unknown field(s) {', '.join(sorted(unknown))}")
    if missing:
        raise JobListError(f"{label}: missing {', '.join(missing)}")
    return WarmupJob(
        account=_text(raw["account"], label, "account"),
        nodes=int(_number(raw["nodes"], label, "nodes", whole=True, least=1)),
        cpus_per_node=int(_number(raw["cpus_per_node"], label, "cpus_per_node", whole=True, least=1)),
        run_s=_number(raw["run_s"], label, "run_s", least=1),
    )


def _job(raw: Any, index: int, where: str) -> CalibrationJob:
    label = f"{where}: job {index + 1}"
    if not isinstance(raw, dict):
        raise JobListError(f"{label}: expected an object")
    label = f"{where}: job {index + 1} ({raw.get('name', '?')})"
    unknown = set(raw) - _FIELDS
    if unknown:
        raise JobListError(f"{label}: unknown field(s) {', '.join(sorted(unknown))}")
    missing = [f for f in _REQUIRED if f not in raw]
    if missing:
        raise JobListError(f"{label}: missing {', '.join(missing)}")
    job = CalibrationJob(
        name=_text(raw["name"], label, "name"),
        at_s=_number(raw["at_s"], label, "at_s"),
        gpus_per_worker=int(_number(raw["gpus_per_worker"], label, "gpus_per_worker", whole=True, least=1)),
        workers=int(_number(raw.get("workers", 1), label, "workers", whole=True, least=1)),
        run_s=_number(raw["run_s"], label, "run_s", least=1),
        time_limit_min=int(_number(raw["time_limit_min"], label, "time_limit_min", whole=True, least=1)),
        cancel_at_s=None if raw.get("cancel_at_s") is None else _number(raw["cancel_at_s"], label, "cancel_at_s"),
        local=_flag(raw.get("local", False), label),
        priority=_priority(raw.get("priority", "normal"), label),
        account=_text(raw["account"], label, "account") if "account" in raw else "",
        qos=_text(raw["qos"], label, "qos") if "qos" in raw else "",
        mig_profile=_mig(raw.get("mig_profile", ""), label),
    )
    if job.qos and not job.local:
        raise JobListError(f"{label}: qos is named by local jobs only (the broker's take their account's default)")
    if job.cancel_at_s is not None and job.cancel_at_s <= job.at_s:
        raise JobListError(f"{label}: cancel_at_s must come after at_s")
    return job


def _text(value: Any, label: str, field: str) -> str:
    if not isinstance(value, str) or not value or not all(c.isalnum() or c in "-_" for c in value):
        raise JobListError(f"{label}: {field} must be letters, digits, - or _")
    return value


def _number(value: Any, label: str, field: str, *, whole: bool = False, least: float = 0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (whole and not float(value).is_integer()):
        raise JobListError(f"{label}: {field} must be a {'whole ' if whole else ''}number, not {value!r}")
    if value < least:
        raise JobListError(f"{label}: {field} must be at least {least:g}, not {value!r}")
    return float(value)


def _priority(value: Any, label: str) -> str:
    if value not in PRIORITIES:
        raise JobListError(f"{label}: priority must be one of {', '.join(PRIORITIES)}, not {value!r}")
    return str(value)


def _mig(value: Any, label: str) -> str:
    if value != "" and (not isinstance(value, str) or not MIG_PROFILE_RE.match(value)):
        raise JobListError(f"{label}: mig_profile must be a MIG profile such as 1g.5gb, not {value!r}")
    return str(value)


def _flag(value: Any, label: str) -> bool:
    if not isinstance(value, bool):
        raise JobListError(f"{label}: local must be true or false, not {value!r}")
    return value
