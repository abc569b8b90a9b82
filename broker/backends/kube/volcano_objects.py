"""What Volcano's objects say, read without a cluster: a vcjob's phase as the broker's job
state, why a gang waits (its PodGroup, its queue), the GPUs a gang needs, and when a job ran
(``status.conditions``). Pure functions, checked against captured objects
(``tests/broker/backends/kube/data/real/``); the backend (volcano.py) reads the cluster."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Mapping

from broker.backends.base import JobState, Reason
from broker.backends.json_fields import Fields
from broker.backends.kube.common import condition_fields, is_gpu_resource, parse_time, pod_gpus, quantity
from broker.backends.kube.jobs import seconds_between

PHASES = {
    "Pending": JobState.PENDING,
    "Running": JobState.RUNNING,
    "Restarting": JobState.RUNNING,
    "Completing": JobState.RUNNING,
    "Completed": JobState.COMPLETED,
    "Failed": JobState.FAILED,
    # Abort is an outside request (suspend/abort); Terminate is Volcano's own reaction.
    "Aborting": JobState.CANCELLED,
    "Aborted": JobState.CANCELLED,
    "Terminating": JobState.FAILED,
    "Terminated": JobState.FAILED,
}
# members that would fit: "3 Schedulable"; with the preempt action on, "3 Pipelined" (placed
# on a node's future idle GPUs while the gang waits for the rest)
_SCHEDULABLE_RE = re.compile(r"(\d+)\s+(?:Schedulable|Pipelined)\b")


_QUOTA_EVENT = "queue resource quota insufficient"


def gang_reason(
    pod_group: Mapping[str, Any] | None,
    queue_state: str,
    queue: str,
    events: tuple[str, ...] = (),
    capability: Mapping[str, Any] | None = None,
) -> tuple[Reason, str]:
    """Why a vcjob waits: queue closed, over the queue's capability, gang partly placeable,
    or no room at all.  ``events``: the PodGroup's event messages, newest first;
    ``capability``: the queue's spec.capability."""
    if queue_state in ("Closed", "Closing"):
        return Reason.UNAVAILABLE, f"Volcano queue {queue} is {queue_state}"
    if queue_state == "Missing":
        return Reason.UNAVAILABLE, f"Volcano queue {queue} not found"
    if pod_group is None:
        return Reason.OTHER, "no PodGroup yet"
    cond = condition_fields(pod_group, "Unschedulable")
    if not cond or cond.value("status") != "True":
        phase = Fields(pod_group).obj("status").text("phase", "Pending")
        # Real Volcano leaves a PodGroup its enqueue step refuses (queue capability) in
        # Pending with no condition at all: the reason is only in its events.
        quota = next((m for m in events if _QUOTA_EVENT in m), "")
        if phase == "Pending" and quota:
            never = over_capability(pod_group, capability or {})
            return (Reason.POLICY if never else Reason.CAPACITY), quota
        return Reason.NONE, f"PodGroup {phase}"
    message = cond.text("message") or cond.text("reason")
    if cond.value("reason") == "NotEnoughResources":
        # "... Pending: 1 Unschedulable, 3 Schedulable" (or "3 Pipelined"): some would fit.
        match = _SCHEDULABLE_RE.search(message)
        return (Reason.GANG if match and int(match.group(1)) > 0 else Reason.CAPACITY), message
    return Reason.CAPACITY, message


def over_capability(pod_group: Mapping[str, Any], capability: Mapping[str, Any]) -> bool:
    """The gang alone needs more of some resource than its queue may ever hold."""
    need = Fields(pod_group).obj("spec", "minResources").raw
    return any(
        quantity(need.get(name, need.get(f"requests.{name}", 0))) > quantity(limit)
        for name, limit in capability.items()
    )


def pod_group_gpus(pod_group: Mapping[str, Any]) -> int:
    """The gang's GPUs from ``minResources``.  Real Volcano lists each resource twice,
    ``nvidia.com/gpu`` and ``requests.nvidia.com/gpu`` (data/real/volcano-podgroup-*):
    counted once."""
    need = Fields(pod_group).obj("spec", "minResources")
    per_name: dict[str, int] = {}
    for key, value in need.raw.items():
        name = key.removeprefix("requests.")
        if is_gpu_resource(name):
            per_name[name] = max(per_name.get(name, 0), quantity(value, need.at(key)))
    return sum(per_name.values())


def vcjob_gpus(job: Mapping[str, Any]) -> int:
    total = 0
    for task in Fields(job).obj("spec").objs("tasks"):
        total += task.whole("replicas") * pod_gpus(task.obj("template", "spec"))
    return total


def phase_times(job: Mapping[str, Any]) -> tuple[datetime | None, datetime | None]:
    """First Running transition and the terminal transition, from status.conditions."""
    start = end = None
    status = Fields(job).obj("status")
    for cond in status.objs("conditions"):
        when = parse_time(cond.text("lastTransitionTime"))
        if cond.value("status") == "Running" and start is None:
            start = when
        if PHASES.get(cond.text("status")) in (JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED):
            end = when
    state = status.obj("state")
    if end is None and PHASES.get(state.text("phase"), JobState.PENDING).ended:
        end = parse_time(state.text("lastTransitionTime"))
    return start, end


def running_seconds(job: Mapping[str, Any], end: datetime | None) -> int:
    """Seconds in Running or Completing, summed over the job's runs (``status.conditions``, a
    condition per phase change): a restarted job is not charged for its wait in between."""
    changes = sorted(
        (when, cond.text("status"))
        for cond in Fields(job).obj("status").objs("conditions")
        if (when := parse_time(cond.text("lastTransitionTime"))) is not None
    )
    total = 0
    for i, (when, phase) in enumerate(changes):
        if phase in ("Running", "Completing"):
            total += seconds_between(when, changes[i + 1][0] if i + 1 < len(changes) else end)
    return total
