"""Pure functions from Slurm's text and JSON to the records of transport.py.

Nothing here runs a command or opens a socket, so every function is tested against
real output captured from Slurm 22.05 (tests/broker/backends/slurm/fixtures/).
The JSON readers accept both the 22.05 shapes (v0.0.38: plain numbers, state strings)
and the 23.02+ shapes (v0.0.39+: ``{"set": true, "number": N}``, state lists).
"""

from __future__ import annotations

import itertools
import math
import re
from datetime import datetime, timezone
from typing import Any, Iterable, Iterator, Mapping

from broker.backends.base import WORKLOAD_ID_PREFIX

# re-exported: callers and tests read these as parsers.<name>
from broker.backends.slurm import known_fields as known
from broker.backends.slurm.errors import (  # noqa: F401
    TRANSIENT_MARKERS,
    is_transient,
    rest_error_is_rejection,
    rest_errors,
    slurm_error_message,
)
from broker.backends.slurm.states import (  # noqa: F401
    DRAINING_FLAGS,
    UNHEALTHY_BASES,
    UNHEALTHY_FLAGS,
    job_reason,
    job_state_base,
    map_job_state,
    map_reason,
    node_health,
    node_health_reason,
    split_node_state,
)
from broker.backends.slurm.transport import GresItem, SlurmAcct, SlurmJob, SlurmNode
from broker.backends.slurm.fields import unknown_fields
from broker.backends.slurm.values import NULLS, clean, number  # noqa: F401

US = "\x1f"  # field delimiter we ask squeue/sacct for: job names and comments may hold '|'
WORKLOAD_ID_RE = re.compile(r"^" + re.escape(WORKLOAD_ID_PREFIX) + r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")


# ------------------------------------------------------------------ scalars


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


# More names than any one host list of a real cluster holds: a longer expansion is bad
# input (``n[0-99999999999]``), and expanding it would take the worker's memory.
MAX_HOSTLIST = 65_536
_RANGE = re.compile(r"^(\d+)-(\d+)$")


def _expand_range(body: str) -> list[str] | None:
    """The names of one bracket (``1-3,05``); None when it is not Slurm's digits and dashes."""
    items: list[str] = []
    for part in body.split(","):
        part = part.strip()
        if m := _RANGE.match(part):
            lo, hi = m.groups()
            width = len(lo) if lo.startswith("0") else 0
            step = 1 if int(hi) >= int(lo) else -1
            if abs(int(hi) - int(lo)) >= MAX_HOSTLIST:
                return None
            items.extend(str(i).zfill(width) for i in range(int(lo), int(hi) + step, step))
        elif part.isdigit():
            items.append(part)
        elif part:
            return None
    return items


def _expand_piece(piece: str) -> list[str]:
    parts = re.split(r"(\[[^\]]*\])", piece)
    choices = [_expand_range(p[1:-1]) if p.startswith("[") else [p] for p in parts]
    if any(c is None for c in choices) or math.prod(len(c) for c in choices if c is not None) > MAX_HOSTLIST:
        return [piece]  # unreadable or too long: the name as written, which matches no node
    return ["".join(combo) for combo in itertools.product(*(c for c in choices if c is not None))]


def expand_hostlist(text: Any) -> tuple[str, ...]:
    """``n[1-3,5],gpu[01-02]-ib`` -> n1 n2 n3 n5 gpu01-ib gpu02-ib.  A piece that is not
    Slurm's range syntax, or would take the list past MAX_HOSTLIST hosts, is kept as written."""
    text = clean(text)
    if not text or text == "None assigned":
        return ()
    hosts: list[str] = []
    for piece in split_top(text):
        hosts.extend(_expand_piece(piece) if len(hosts) < MAX_HOSTLIST else [piece])
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
    mult = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}[m.group(2).upper()]
    return int(m.group(1)) * mult


def tres_gpu_types(tres: Mapping[str, str]) -> dict[str, int]:
    """GPUs per type from TRES keys ``gres/gpu:<type>``."""
    out: dict[str, int] = {}
    for key, value in tres.items():
        if key.startswith("gres/gpu:"):
            out[key[len("gres/gpu:") :].lower()] = _count(value)
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


# ------------------------------------------------------------------ scontrol show node -o

_KEY_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_:/]*$")


# keys scontrol may print after the free text of Reason= (which may itself hold '=')
_AFTER_REASON = frozenset({"Comment", "Extra", "NextState", "ResumeAfterTime", "InstanceId", "InstanceType", "Reason"})


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
        extra=unknown_fields("scontrol node", kv, known.SCONTROL_NODE),
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
    "JobID",
    "Name",
    "State",
    "Reason",
    "tres-alloc",
    "NumNodes",
    "NodeList",
    "SubmitTime",
    "StartTime",
    "EndTime",
    "Account",
    "Partition",
    "QOS",
    "tres-per-node",
    "Comment",
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
        jobs.append(job_from_fields(dict(zip(fields, values, strict=True))))
    return jobs


# ------------------------------------------------------------------ sacct

SACCT_FIELDS: tuple[str, ...] = (
    "JobID",
    "JobName",
    "Account",
    "Partition",
    "AllocTRES",
    "ElapsedRaw",
    "Start",
    "End",
    "State",
    "Comment",
    "NodeList",
    "ReqTRES",
    "User",
)


def acct_from_fields(f: Mapping[str, str], check: bool = True) -> SlurmAcct:
    """``check``: look for columns sacct does not have (off when the columns are ours)."""
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
        user=clean(f.get("User", "")),
        extra=unknown_fields("sacct column", f, known.SACCT_COLUMNS) if check else {},
    )


def parse_sacct_line(line: str, fields: tuple[str, ...] = SACCT_FIELDS, delimiter: str = US) -> SlurmAcct | None:
    """One ``sacct -P --noheader`` line; None for a line that does not fit."""
    line = line.rstrip("\n")
    if not line.strip():
        return None
    values = line.split(delimiter)
    if len(values) != len(fields):
        return None
    # the 1M-line ingest path: our own columns need no per-line check
    return acct_from_fields(dict(zip(fields, values, strict=False)), check=fields is not SACCT_FIELDS)


def iter_sacct(
    lines: Iterable[str], fields: tuple[str, ...] = SACCT_FIELDS, delimiter: str = US
) -> Iterator[SlurmAcct]:
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
