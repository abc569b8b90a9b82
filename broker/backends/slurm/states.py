"""Slurm job states, pending reasons and node states -> the broker's JobState and Reason,
and a node's health.  Pure functions over the text Slurm prints (or the lists of the
v0.0.40+ JSON)."""

from __future__ import annotations

import re
from typing import Any, Iterable

from broker.backends.base import JobState, Reason
from broker.backends.slurm.transport import SlurmNode
from broker.backends.slurm.values import clean

_JOB_STATES: dict[str, JobState] = {
    "PENDING": JobState.PENDING,
    "CONFIGURING": JobState.PENDING,
    "REQUEUED": JobState.PENDING,
    "REQUEUE_HOLD": JobState.PENDING,
    "REQUEUE_FED": JobState.PENDING,
    "RESV_DEL_HOLD": JobState.PENDING,
    "RUNNING": JobState.RUNNING,
    "COMPLETING": JobState.RUNNING,
    "SUSPENDED": JobState.RUNNING,
    "STOPPED": JobState.RUNNING,
    "SIGNALING": JobState.RUNNING,
    "STAGE_OUT": JobState.RUNNING,
    "RESIZING": JobState.RUNNING,
    "UPDATE_DB": JobState.RUNNING,
    "POWER_UP_NODE": JobState.PENDING,
    "COMPLETED": JobState.COMPLETED,
    "CANCELLED": JobState.CANCELLED,
    "FAILED": JobState.FAILED,
    "TIMEOUT": JobState.FAILED,
    "NODE_FAIL": JobState.FAILED,
    "PREEMPTED": JobState.PREEMPTED,
    "BOOT_FAIL": JobState.FAILED,
    "DEADLINE": JobState.FAILED,
    "OUT_OF_MEMORY": JobState.FAILED,
    "SPECIAL_EXIT": JobState.FAILED,
    "REVOKED": JobState.FAILED,
}
# squeue's compact codes, in case a caller passes %t output
_SHORT_STATES = {
    "PD": "PENDING",
    "R": "RUNNING",
    "CG": "COMPLETING",
    "CD": "COMPLETED",
    "CA": "CANCELLED",
    "F": "FAILED",
    "TO": "TIMEOUT",
    "NF": "NODE_FAIL",
    "PR": "PREEMPTED",
    "S": "SUSPENDED",
    "ST": "STOPPED",
    "BF": "BOOT_FAIL",
    "DL": "DEADLINE",
    "OOM": "OUT_OF_MEMORY",
    "CF": "CONFIGURING",
    "RQ": "REQUEUED",
    "RH": "REQUEUE_HOLD",
    "SE": "SPECIAL_EXIT",
    "RV": "REVOKED",
    "SI": "SIGNALING",
    "SO": "STAGE_OUT",
    "RS": "RESIZING",
    "RD": "RESV_DEL_HOLD",
    "RF": "REQUEUE_FED",
}


def job_state_base(raw: Any) -> str:
    """``CANCELLED by 0`` -> CANCELLED; ``["PENDING", "REQUEUED"]`` -> PENDING; ``R`` -> RUNNING."""
    if isinstance(raw, (list, tuple)):
        raw = raw[0] if raw else ""
    text = clean(raw).upper()
    if not text:
        return ""
    text = text.split()[0].rstrip("+")
    return _SHORT_STATES.get(text, text)


def map_job_state(raw: Any) -> JobState:
    return _JOB_STATES.get(job_state_base(raw), JobState.UNKNOWN)


_REASON_EXACT: dict[str, Reason] = {
    "none": Reason.NONE,
    "": Reason.NONE,
    "resources": Reason.CAPACITY,
    "priority": Reason.CAPACITY,
    "nodes_busy": Reason.CAPACITY,
    "licenses": Reason.CAPACITY,
    "jobhelduser": Reason.HELD,
    "jobheldadmin": Reason.HELD,
    "launch failed requeued held": Reason.HELD,
    "reqnodenotavail": Reason.UNAVAILABLE,
    "partitiondown": Reason.UNAVAILABLE,
    "partitioninactive": Reason.UNAVAILABLE,
    "nodedown": Reason.UNAVAILABLE,
    "dependency": Reason.WAITING,
    "begintime": Reason.WAITING,
}


def map_reason(raw: Any) -> Reason:
    """Slurm's pending reason -> Reason.  The raw text is kept beside by the caller."""
    text = clean(raw)
    low = text.lower()
    if low in _REASON_EXACT:
        return _REASON_EXACT[low]
    if low.startswith("reqnodenotavail"):  # "ReqNodeNotAvail, UnavailableNodes:n1"
        return Reason.UNAVAILABLE
    if low.startswith(("qos", "assoc")):  # QOSMax*, QOSGrp*, AssocGrp*, AssocMax*, ...
        return Reason.POLICY
    if re.match(r"^max\w*per(account|user)$", low):  # MaxGRESPerAccount, MaxJobsPerUser, ...
        return Reason.POLICY
    if low in ("partitiontimelimit", "partitionnodelimit"):
        return Reason.POLICY
    return Reason.OTHER


def job_reason(state: JobState, raw_reason: str) -> Reason:
    """Reason only means something while a job waits."""
    if state != JobState.PENDING:
        return Reason.NONE
    return map_reason(raw_reason)


# node states: base words and the flags Slurm adds with '+', or sinfo's suffix symbols
_NODE_SUFFIX_FLAGS = {
    "*": "NOT_RESPONDING",
    "~": "POWERED_DOWN",
    "#": "POWERING_UP",
    "%": "POWERING_DOWN",
    "!": "POWER_DOWN",
    "$": "MAINT",
    "@": "REBOOT_REQUESTED",
    "^": "REBOOT_ISSUED",
    "-": "PLANNED",
}
_SINFO_WORDS = {
    "DRAINED": ("IDLE", "DRAIN"),
    "DRAINING": ("ALLOCATED", "DRAIN"),
    "DRNG": ("ALLOCATED", "DRAIN"),
    "DRAIN": ("IDLE", "DRAIN"),
    "ALLOC": ("ALLOCATED", ""),
    "MIX": ("MIXED", ""),
    "COMP": ("COMPLETING", ""),
    "INVAL": ("INVAL", "INVALID"),
}
UNHEALTHY_BASES = frozenset({"DOWN", "ERROR", "FUTURE", "UNKNOWN", "INVAL", "FAIL"})
UNHEALTHY_FLAGS = frozenset(
    {
        "NOT_RESPONDING",
        "FAIL",
        "FAILING",
        "INVALID",
        "INVALID_REG",
        "POWERED_DOWN",
        "POWER_DOWN",
        "POWERING_DOWN",
        "POWERING_UP",
        "REBOOT_ISSUED",
        "NO_RESPOND",
    }
)
DRAINING_FLAGS = frozenset({"DRAIN", "DRAINING", "DRAINED", "MAINT", "REBOOT_REQUESTED"})


def split_node_state(raw: Any, extra_flags: Iterable[str] = ()) -> tuple[str, frozenset[str]]:
    """``IDLE+DRAIN`` / ``DOWN*`` / ``drained`` / ``["IDLE", "DRAIN"]`` -> (base, flags)."""
    words: list[str]
    if isinstance(raw, (list, tuple)):
        words = [str(w) for w in raw]
    else:
        words = clean(raw).split("+") if clean(raw) else []
    flags = {str(f).upper() for f in extra_flags if f}
    base = ""
    for i, word in enumerate(words):
        word = word.strip().upper()
        while word and word[-1] in _NODE_SUFFIX_FLAGS:
            flags.add(_NODE_SUFFIX_FLAGS[word[-1]])
            word = word[:-1]
        if i == 0 and word in _SINFO_WORDS:
            word, flag = _SINFO_WORDS[word]
            if flag:
                flags.add(flag)
        if i == 0 and not base:
            base = word
        elif word:
            flags.add(word)
    return base or "UNKNOWN", frozenset(flags)


def node_health(node: SlurmNode) -> tuple[bool, bool]:
    """(healthy, draining).  Down, failed, not responding, powered down: unhealthy.
    Drain (drained or draining), maintenance, reboot requested: draining."""
    healthy = node.state not in UNHEALTHY_BASES and not (node.flags & UNHEALTHY_FLAGS)
    draining = bool(node.flags & DRAINING_FLAGS) or node.state in ("DRAINED", "DRAINING")
    return healthy, draining


def node_health_reason(node: SlurmNode, gpus_drained: int = 0) -> str:
    """Why the node's GPUs take no work, as Slurm says it: its state and flags, then the
    reason an admin or slurmctld gave ("DRAIN: bad gpu", "DOWN+NOT_RESPONDING: Not
    responding"); GPUs drained by GresDrain on a node that is otherwise up; "" when none."""
    healthy, draining = node_health(node)
    if not healthy or draining:
        state = "+".join([node.state, *sorted(node.flags & (UNHEALTHY_FLAGS | DRAINING_FLAGS))])
        reason = node.reason if node.reason and node.reason != "None" else ""
        return f"{state}: {reason}" if reason else state
    if gpus_drained:
        return f"{gpus_drained} GPU{'s' if gpus_drained != 1 else ''} drained (GresDrain)"
    return ""
