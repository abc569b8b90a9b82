"""Pure functions from Slurm's text and JSON to the records of transport.py.

Nothing here runs a command or opens a socket, so every function is tested against
real output captured from Slurm 22.05 (tests/broker/backends/slurm/fixtures/).
The JSON readers accept both the 22.05 shapes (v0.0.38: plain numbers, state strings)
and the 23.02+ shapes (v0.0.39+: ``{"set": true, "number": N}``, state lists).
"""
from __future__ import annotations

import itertools
import re
from datetime import datetime, timezone
from typing import Any, Iterable, Iterator, Mapping

from broker.backends.base import WORKLOAD_ID_PREFIX, JobState, Reason
from broker.backends.slurm.transport import GresItem, SlurmAcct, SlurmJob, SlurmNode

US = "\x1f"  # field delimiter we ask squeue/sacct for: job names and comments may hold '|'
NULLS = frozenset({"", "(null)", "N/A", "n/a", "None", "none", "Unknown", "UNKNOWN", "null"})

WORKLOAD_ID_RE = re.compile(r"^" + re.escape(WORKLOAD_ID_PREFIX) + r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")


# ------------------------------------------------------------------ scalars

def clean(value: Any) -> str:
    """Text of a Slurm field, with Slurm's spellings of "nothing" turned into ""."""
    if value is None:
        return ""
    text = str(value).strip()
    return "" if text in NULLS else text


def number(value: Any, default: int = 0) -> int:
    """An integer from 5, "5", {"set": true, "number": 5} (v0.0.39+) or nothing."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return default
        value = value.get("number")
    if value is None or isinstance(value, bool):
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        text = clean(value)
        try:
            return int(float(text)) if text else default
        except ValueError:
            return default


def parse_time(value: Any) -> datetime | None:
    """Aware UTC datetime from epoch seconds (what SLURM_TIME_FORMAT=%s and the REST API
    give), an ISO timestamp (Slurm's default format, local time of the Slurm host, read
    here as this machine's local time) or nothing (N/A, Unknown, None, 0)."""
    if isinstance(value, dict):
        value = number(value, 0)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, timezone.utc) if value > 0 else None
    text = clean(value)
    if not text:
        return None
    if text.isdigit():
        seconds = int(text)
        return datetime.fromtimestamp(seconds, timezone.utc) if seconds > 0 else None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.astimezone()  # naive: the local time zone
    return parsed.astimezone(timezone.utc)


def workload_id_of(name: str, comment: str) -> str | None:
    """The broker workload id a job carries: its comment; or, where the comment is not
    (yet) known, its job name.  slurmdbd stores the comment only when the job ends,
    so sacct shows pending and running jobs without it."""
    comment = clean(comment)
    if comment:
        return comment if WORKLOAD_ID_RE.match(comment) else None
    name = clean(name)
    return name if WORKLOAD_ID_RE.match(name) else None


# ------------------------------------------------------------------ lists

def split_top(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside (), [] and {}: ``gpu:a100:2(IDX:0,2),mps:10``."""
    out: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(0, depth - 1)
        elif ch == sep and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return [p.strip() for p in out if p.strip()]


def _expand_range(body: str) -> list[str]:
    items: list[str] = []
    for part in body.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-", 1)
            width = len(lo) if lo.startswith("0") else 0
            step = 1 if int(hi) >= int(lo) else -1
            items.extend(str(i).zfill(width) for i in range(int(lo), int(hi) + step, step))
        elif part:
            items.append(part)
    return items


def expand_hostlist(text: Any) -> tuple[str, ...]:
    """``n[1-3,5],gpu[01-02]-ib`` -> n1 n2 n3 n5 gpu01-ib gpu02-ib."""
    text = clean(text)
    if not text or text == "None assigned":
        return ()
    hosts: list[str] = []
    for piece in split_top(text):
        parts = re.split(r"(\[[^\]]*\])", piece)
        choices = [_expand_range(p[1:-1]) if p.startswith("[") else [p] for p in parts]
        hosts.extend("".join(combo) for combo in itertools.product(*choices))
    return tuple(hosts)


def parse_tres(text: Any) -> dict[str, str]:
    """``cpu=1,mem=1G,gres/gpu=2,gres/gpu:a100=2`` -> dict (values as given)."""
    text = clean(text)
    out: dict[str, str] = {}
    for item in split_top(text):
        key, sep, value = item.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def _count(text: str) -> int:
    text = text.strip()
    m = re.match(r"^(\d+)([KMGT]?)$", text, re.I)
    if not m:
        return 0
    mult = {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3, "T": 1024 ** 4}[m.group(2).upper()]
    return int(m.group(1)) * mult


def tres_gpu_types(tres: Mapping[str, str]) -> dict[str, int]:
    """GPUs per type from TRES keys ``gres/gpu:<type>``."""
    out: dict[str, int] = {}
    for key, value in tres.items():
        if key.startswith("gres/gpu:"):
            out[key[len("gres/gpu:"):].lower()] = _count(value)
    return out


def tres_gpus(tres: Mapping[str, str]) -> int:
    """Total GPUs in a TRES dict: ``gres/gpu``, else the sum of the typed entries."""
    if "gres/gpu" in tres:
        return _count(tres["gres/gpu"])
    return sum(tres_gpu_types(tres).values())


def tres_gpu_model(tres: Mapping[str, str]) -> str:
    """The GPU type with most GPUs in a TRES dict; "" when only untyped."""
    types = tres_gpu_types(tres)
    if not types:
        return ""
    return max(sorted(types), key=lambda t: types[t])


_COUNT_RE = re.compile(r"^\d+[KMGT]?$", re.I)


def parse_gres(text: Any) -> tuple[GresItem, ...]:
    """``gpu:a100:4(S:0-1),gpu:1g.10gb:7,gpu:2,mps:200`` -> GresItems.

    Also reads tres_per_node forms ``gres:gpu:a100:2`` and ``gres/gpu:a100:2``."""
    items: list[GresItem] = []
    for raw in split_top(clean(text)):
        detail = ""
        m = re.match(r"^(.*?)\((.*)\)$", raw)
        if m:
            raw, detail = m.group(1), m.group(2)
        if raw.startswith(("gres:", "gres/")):
            raw = raw[5:]
        parts = raw.split(":")
        name = parts[0].strip()
        if not name:
            continue
        gtype, count = "", 1
        if len(parts) >= 2:
            if _COUNT_RE.match(parts[-1]):
                count = _count(parts[-1])
                gtype = ":".join(parts[1:-1])
            else:
                gtype = ":".join(parts[1:])
        items.append(GresItem(name=name, type=gtype.lower(), count=count, detail=detail))
    return tuple(items)


def gpu_items(items: Iterable[GresItem]) -> list[GresItem]:
    return [i for i in items if i.name == "gpu"]


# ------------------------------------------------------------------ states and reasons

_JOB_STATES: dict[str, JobState] = {
    "PENDING": JobState.PENDING, "CONFIGURING": JobState.PENDING, "REQUEUED": JobState.PENDING,
    "REQUEUE_HOLD": JobState.PENDING, "REQUEUE_FED": JobState.PENDING,
    "RESV_DEL_HOLD": JobState.PENDING,
    "RUNNING": JobState.RUNNING, "COMPLETING": JobState.RUNNING, "SUSPENDED": JobState.RUNNING,
    "STOPPED": JobState.RUNNING, "SIGNALING": JobState.RUNNING, "STAGE_OUT": JobState.RUNNING,
    "RESIZING": JobState.RUNNING, "UPDATE_DB": JobState.RUNNING, "POWER_UP_NODE": JobState.PENDING,
    "COMPLETED": JobState.COMPLETED,
    "CANCELLED": JobState.CANCELLED,
    "FAILED": JobState.FAILED, "TIMEOUT": JobState.FAILED, "NODE_FAIL": JobState.FAILED,
    "PREEMPTED": JobState.FAILED, "BOOT_FAIL": JobState.FAILED, "DEADLINE": JobState.FAILED,
    "OUT_OF_MEMORY": JobState.FAILED, "SPECIAL_EXIT": JobState.FAILED, "REVOKED": JobState.FAILED,
}
# squeue's compact codes, in case a caller passes %t output
_SHORT_STATES = {"PD": "PENDING", "R": "RUNNING", "CG": "COMPLETING", "CD": "COMPLETED",
                 "CA": "CANCELLED", "F": "FAILED", "TO": "TIMEOUT", "NF": "NODE_FAIL",
                 "PR": "PREEMPTED", "S": "SUSPENDED", "ST": "STOPPED", "BF": "BOOT_FAIL",
                 "DL": "DEADLINE", "OOM": "OUT_OF_MEMORY", "CF": "CONFIGURING", "RQ": "REQUEUED",
                 "RH": "REQUEUE_HOLD", "SE": "SPECIAL_EXIT", "RV": "REVOKED", "SI": "SIGNALING",
                 "SO": "STAGE_OUT", "RS": "RESIZING", "RD": "RESV_DEL_HOLD", "RF": "REQUEUE_FED"}


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
    "none": Reason.NONE, "": Reason.NONE,
    "resources": Reason.CAPACITY, "priority": Reason.CAPACITY,
    "nodes_busy": Reason.CAPACITY, "licenses": Reason.CAPACITY,
    "jobhelduser": Reason.HELD, "jobheldadmin": Reason.HELD,
    "launch failed requeued held": Reason.HELD,
    "reqnodenotavail": Reason.UNAVAILABLE, "partitiondown": Reason.UNAVAILABLE,
    "partitioninactive": Reason.UNAVAILABLE, "nodedown": Reason.UNAVAILABLE,
    "dependency": Reason.WAITING, "begintime": Reason.WAITING,
}


def map_reason(raw: Any) -> Reason:
    """Slurm's pending reason -> Reason.  The raw text is kept beside by the caller."""
    text = clean(raw)
    low = text.lower()
    if low in _REASON_EXACT:
        return _REASON_EXACT[low]
    if low.startswith("reqnodenotavail"):          # "ReqNodeNotAvail, UnavailableNodes:n1"
        return Reason.UNAVAILABLE
    if low.startswith(("qos", "assoc")):           # QOSMax*, QOSGrp*, AssocGrp*, AssocMax*, ...
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
_NODE_SUFFIX_FLAGS = {"*": "NOT_RESPONDING", "~": "POWERED_DOWN", "#": "POWERING_UP",
                      "%": "POWERING_DOWN", "!": "POWER_DOWN", "$": "MAINT", "@": "REBOOT_REQUESTED",
                      "^": "REBOOT_ISSUED", "-": "PLANNED"}
_SINFO_WORDS = {"DRAINED": ("IDLE", "DRAIN"), "DRAINING": ("ALLOCATED", "DRAIN"),
                "DRNG": ("ALLOCATED", "DRAIN"), "DRAIN": ("IDLE", "DRAIN"), "ALLOC": ("ALLOCATED", ""),
                "MIX": ("MIXED", ""), "COMP": ("COMPLETING", ""), "INVAL": ("INVAL", "INVALID")}
UNHEALTHY_BASES = frozenset({"DOWN", "ERROR", "FUTURE", "UNKNOWN", "INVAL", "FAIL"})
UNHEALTHY_FLAGS = frozenset({"NOT_RESPONDING", "FAIL", "FAILING", "INVALID", "INVALID_REG",
                             "POWERED_DOWN", "POWER_DOWN", "POWERING_DOWN", "POWERING_UP",
                             "REBOOT_ISSUED", "NO_RESPOND"})
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


# ------------------------------------------------------------------ scontrol show node -o

_KEY_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_:/]*$")


# keys scontrol may print after the free text of Reason= (which may itself hold '=')
_AFTER_REASON = frozenset({"Comment", "Extra", "NextState", "ResumeAfterTime", "InstanceId",
                           "InstanceType", "Reason"})


def parse_kv_line(line: str) -> dict[str, str]:
    """One ``scontrol show ... -o`` line -> dict.  A word without '=' (or whose left side
    is no key) continues the previous value: ``OS=Linux 6.1 #1 SMP``.  After ``Reason=``
    only a known key starts a new field: the reason is free text."""
    out: dict[str, str] = {}
    last: str | None = None
    for word in line.strip().split():
        key, sep, value = word.partition("=")
        if sep and _KEY_RE.match(key) and (last != "Reason" or key in _AFTER_REASON):
            out[key] = value
            last = key
        elif last is not None:
            out[last] = (out[last] + " " + word).strip()
    return out


def node_from_kv(kv: Mapping[str, str]) -> SlurmNode:
    base, flags = split_node_state(kv.get("State", ""))
    return SlurmNode(
        name=kv.get("NodeName", ""),
        state=base,
        flags=flags,
        partitions=tuple(p for p in clean(kv.get("Partitions", "")).split(",") if p),
        gres=parse_gres(kv.get("Gres", "")),
        gres_used=parse_gres(kv["GresUsed"]) if "GresUsed" in kv else None,
        gres_drained=parse_gres(kv.get("GresDrain", "")),
        cfg_tres=parse_tres(kv.get("CfgTRES", "")),
        alloc_tres=parse_tres(kv.get("AllocTRES", "")),
        reason=clean(kv.get("Reason", "")),
    )


def parse_scontrol_nodes(text: str) -> list[SlurmNode]:
    """``scontrol show node -o [-d]`` output -> nodes."""
    nodes = []
    for line in text.splitlines():
        if line.startswith("NodeName="):
            nodes.append(node_from_kv(parse_kv_line(line)))
    return nodes


# ------------------------------------------------------------------ squeue

# squeue -O fields we ask for, in order; each ends with the US delimiter
SQUEUE_FIELDS: tuple[str, ...] = (
    "JobID", "Name", "State", "Reason", "tres-alloc", "NumNodes", "NodeList", "SubmitTime",
    "StartTime", "EndTime", "Account", "Partition", "QOS", "tres-per-node", "Comment",
)


def squeue_format() -> str:
    return ",".join(f"{f}:{US}" for f in SQUEUE_FIELDS)


def job_from_fields(f: Mapping[str, str]) -> SlurmJob:
    """A job from squeue fields named as in ``squeue -O`` (JobID, Name, State, ...)."""
    tres = parse_tres(f.get("tres-alloc", ""))
    num_nodes = number(f.get("NumNodes", ""), 0)
    if "gres/gpu" not in tres and not tres_gpu_types(tres):
        # only tres_per_node known (squeue -o %b): per node x nodes
        for item in gpu_items(parse_gres(f.get("tres-per-node", ""))):
            key = f"gres/gpu:{item.type}" if item.type else "gres/gpu"
            tres[key] = str(item.count * max(1, num_nodes))
            if item.type:
                tres["gres/gpu"] = str(_count(tres.get("gres/gpu", "0")) + item.count * max(1, num_nodes))
    return SlurmJob(
        job_id=clean(f.get("JobID", "")),
        name=clean(f.get("Name", "")),
        state=job_state_base(f.get("State", "")),
        reason=clean(f.get("Reason", "")) or "None",
        account=clean(f.get("Account", "")),
        partition=clean(f.get("Partition", "")),
        qos=clean(f.get("QOS", "")),
        comment=clean(f.get("Comment", "")),
        tres=tres,
        num_nodes=num_nodes,
        nodes=expand_hostlist(f.get("NodeList", "")),
        submitted_at=parse_time(f.get("SubmitTime")),
        started_at=parse_time(f.get("StartTime")),
        ended_at=parse_time(f.get("EndTime")),
    )


def parse_squeue(text: str, fields: tuple[str, ...] = SQUEUE_FIELDS, delimiter: str = US) -> list[SlurmJob]:
    jobs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        values = line.split(delimiter)
        if delimiter == US and values and values[-1] == "":
            values = values[:-1]  # every field, the last included, ends with the delimiter
        if len(values) != len(fields):
            continue
        jobs.append(job_from_fields(dict(zip(fields, values))))
    return jobs


# ------------------------------------------------------------------ sacct

SACCT_FIELDS: tuple[str, ...] = (
    "JobID", "JobName", "Account", "Partition", "AllocTRES", "ElapsedRaw", "Start", "End",
    "State", "Comment", "NodeList", "ReqTRES",
)


def acct_from_fields(f: Mapping[str, str]) -> SlurmAcct:
    return SlurmAcct(
        job_id=clean(f.get("JobID", "")),
        name=clean(f.get("JobName", "")),
        account=clean(f.get("Account", "")),
        partition=clean(f.get("Partition", "")),
        state=job_state_base(f.get("State", "")),
        alloc_tres=parse_tres(f.get("AllocTRES", "")),
        req_tres=parse_tres(f.get("ReqTRES", "")),
        elapsed_s=number(f.get("ElapsedRaw", ""), 0),
        started_at=parse_time(f.get("Start")),
        ended_at=parse_time(f.get("End")),
        comment=clean(f.get("Comment", "")),
        nodes=expand_hostlist(f.get("NodeList", "")),
    )


def parse_sacct_line(line: str, fields: tuple[str, ...] = SACCT_FIELDS,
                     delimiter: str = US) -> SlurmAcct | None:
    """One ``sacct -P --noheader`` line; None for a line that does not fit."""
    line = line.rstrip("\n")
    if not line.strip():
        return None
    values = line.split(delimiter)
    if len(values) != len(fields):
        return None
    return acct_from_fields(dict(zip(fields, values)))


def iter_sacct(lines: Iterable[str], fields: tuple[str, ...] = SACCT_FIELDS,
               delimiter: str = US) -> Iterator[SlurmAcct]:
    for line in lines:
        rec = parse_sacct_line(line, fields, delimiter)
        if rec is not None:
            yield rec


def parse_sacct_table(text: str, delimiter: str = "|") -> list[SlurmAcct]:
    """``sacct -P`` output with its header line (field names from the header)."""
    lines = text.splitlines()
    if not lines:
        return []
    fields = tuple(lines[0].split(delimiter))
    return list(iter_sacct(lines[1:], fields, delimiter))


# ------------------------------------------------------------------ REST / --json

def _text(value: Any) -> str:
    if isinstance(value, dict):  # v0.0.40+ may wrap strings? keep the common keys
        for key in ("job", "name", "value"):
            if key in value:
                return clean(value[key])
        return ""
    return clean(value)


def job_from_json(d: Mapping[str, Any]) -> SlurmJob:
    """A job of ``GET /slurm/vX/jobs`` or ``squeue --json``."""
    tres = parse_tres(d.get("tres_alloc_str")) or parse_tres(d.get("tres_req_str"))
    if not tres:
        fields = {"tres-per-node": clean(d.get("tres_per_node")),
                  "NumNodes": str(number(d.get("node_count"), 0))}
        tres = job_from_fields(fields).tres
    return SlurmJob(
        job_id=str(number(d.get("job_id"), 0)),
        name=clean(d.get("name")),
        state=job_state_base(d.get("job_state")),
        reason=clean(d.get("state_reason")) or "None",
        account=clean(d.get("account")),
        partition=clean(d.get("partition")),
        qos=clean(d.get("qos")),
        comment=_text(d.get("comment")),
        tres=tres,
        num_nodes=number(d.get("node_count"), 0),
        nodes=expand_hostlist(d.get("nodes")),
        submitted_at=parse_time(d.get("submit_time")),
        started_at=parse_time(d.get("start_time")),
        ended_at=parse_time(d.get("end_time")),
    )


def node_from_json(d: Mapping[str, Any]) -> SlurmNode:
    """A node of ``GET /slurm/vX/nodes`` or ``sinfo --json``."""
    base, flags = split_node_state(d.get("state"), d.get("state_flags") or ())
    used = d.get("gres_used")
    return SlurmNode(
        name=clean(d.get("name")),
        state=base,
        flags=flags,
        partitions=tuple(d.get("partitions") or ()),
        gres=parse_gres(d.get("gres")),
        gres_used=parse_gres(used) if used is not None else None,
        gres_drained=parse_gres(d.get("gres_drained")),
        cfg_tres=parse_tres(d.get("tres")),
        alloc_tres=parse_tres(d.get("tres_used")),
        reason=clean(d.get("reason")),
    )


def _tres_list(items: Any) -> dict[str, str]:
    """``[{"type": "gres", "name": "gpu:a100", "count": 2}, ...]`` -> TRES dict."""
    out: dict[str, str] = {}
    for item in items or ():
        kind = clean(item.get("type"))
        name = clean(item.get("name"))
        count = item.get("count")
        if count is None or not kind:
            continue
        out[f"{kind}/{name}" if name else kind] = str(number(count, 0))
    return out


def acct_from_json(d: Mapping[str, Any]) -> SlurmAcct:
    """A job of ``GET /slurmdb/vX/jobs`` or ``sacct --json``."""
    state = d.get("state") or {}
    t = d.get("time") or {}
    tres = d.get("tres") or {}
    comment = d.get("comment")
    return SlurmAcct(
        job_id=str(number(d.get("job_id"), 0)),
        name=clean(d.get("name")),
        account=clean(d.get("account")),
        partition=clean(d.get("partition")),
        state=job_state_base(state.get("current") if isinstance(state, dict) else state),
        alloc_tres=_tres_list(tres.get("allocated")),
        req_tres=_tres_list(tres.get("requested")),
        elapsed_s=number(t.get("elapsed"), 0),
        started_at=parse_time(t.get("start")),
        ended_at=parse_time(t.get("end")),
        comment=_text(comment.get("job") if isinstance(comment, dict) else comment),
        nodes=expand_hostlist(d.get("nodes")),
    )


# ------------------------------------------------------------------ errors

# text that says "the control plane did not answer", not "it refused the job"
TRANSIENT_MARKERS = (
    "unable to contact slurm controller", "socket timed out", "connection refused",
    "connect failure", "zero bytes were transmitted", "communication connection failure",
    "temporarily unable", "try again", "resource temporarily unavailable", "slurmctld is busy",
    "connection reset", "connection timed out", "no route to host", "broken pipe",
    "transport endpoint", "protocol authentication error", "invalid authentication credential",
    "munge", "slurmdbd", "unable to connect", "name or service not known", "unspecified error",
    "in standby mode", "not responding",
)


def is_transient(text: str) -> bool:
    low = text.lower()
    return any(marker in low for marker in TRANSIENT_MARKERS)


def slurm_error_message(text: str) -> str:
    """The short refusal of sbatch's stderr: the text after the last 'error:'."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for line in reversed(lines):
        if "submission failed:" in line:
            return line.split("submission failed:", 1)[1].strip()
    for line in reversed(lines):
        if "error:" in line:
            return line.split("error:", 1)[1].strip()
    return lines[-1] if lines else ""


def rest_errors(payload: Any) -> list[tuple[int, str]]:
    """(code, text) of a REST reply's ``errors`` (22.05 uses error_code/errno, slurmdb
    error_number; 23.02+ error_number too)."""
    out = []
    if isinstance(payload, dict):
        for e in payload.get("errors") or ():
            if not isinstance(e, dict):
                continue
            code = e.get("error_code", e.get("error_number", e.get("errno", 0)))
            text = clean(e.get("error")) or clean(e.get("description"))
            out.append((number(code, 0), text))
    return out


def rest_error_is_rejection(code: int, text: str) -> bool:
    """ESLURM_* job errors (2000-4999) and slurmrestd's request errors (9000 invalid
    query, 9001 parse failure, 9002 invalid job description) are refusals unless the
    text says otherwise; protocol/communication errors (1000s, 5000s) and -1 are not."""
    if is_transient(text):
        return False
    return 2000 <= code < 5000 or code in (9000, 9001, 9002)
