"""Slurm's JSON (slurmrestd, and ``squeue/sinfo/sacct --json``) to the records of transport.py.

Pure functions, like parsers.py (whose text readers they share), kept apart so each module
reads as one format.  Both the 22.05 shapes (v0.0.38: plain numbers, state strings) and the
23.02+ shapes (v0.0.39+: ``{"set": true, "number": N}``, state lists) are accepted.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Mapping

from broker.backends.json_fields import BadField, Fields
from broker.backends.slurm import known_fields as known
from broker.backends.slurm.fields import unknown_fields
from broker.backends.slurm.parsers import (
    expand_hostlist,
    job_from_fields,
    parse_gres,
    parse_time,
    parse_tres,
)
from broker.backends.slurm.states import job_state_base, split_node_state
from broker.backends.slurm.transport import SlurmAcct, SlurmJob, SlurmNode
from broker.backends.slurm.values import clean, number


def _text(value: Any) -> str:
    if isinstance(value, dict):  # v0.0.40+ may wrap strings? keep the common keys
        for key in ("job", "name", "value"):
            if key in value:
                return clean(value[key])
        return ""
    return clean(value)


def _num(d: Fields, key: str) -> int:
    """Slurm's number, plain or wrapped; one beyond any count (1e309) names its field."""
    try:
        return number(d.value(key), 0)
    except OverflowError as exc:
        raise BadField(d.at(key), "a finite number", d.value(key)) from exc


def _when(d: Fields, key: str) -> datetime | None:
    try:
        return parse_time(d.value(key))
    except (OverflowError, OSError, ValueError) as exc:  # epoch seconds out of range
        raise BadField(d.at(key), "a time", d.value(key)) from exc


def job_from_json(raw: Mapping[str, Any]) -> SlurmJob:
    """A job of ``GET /slurm/vX/jobs`` or ``squeue --json``."""
    d = Fields(raw)
    tres: Mapping[str, str] = parse_tres(d.value("tres_alloc_str")) or parse_tres(d.value("tres_req_str"))
    if not tres:
        fields = {"tres-per-node": clean(d.value("tres_per_node")), "NumNodes": str(_num(d, "node_count"))}
        tres = job_from_fields(fields).tres
    return SlurmJob(
        job_id=str(_num(d, "job_id")),
        name=clean(d.value("name")),
        state=job_state_base(d.value("job_state")),
        reason=clean(d.value("state_reason")) or "None",
        account=clean(d.value("account")),
        partition=clean(d.value("partition")),
        qos=clean(d.value("qos")),
        comment=_text(d.value("comment")),
        tres=tres,
        num_nodes=_num(d, "node_count"),
        nodes=expand_hostlist(d.value("nodes")),
        submitted_at=_when(d, "submit_time"),
        started_at=_when(d, "start_time"),
        ended_at=_when(d, "end_time"),
        extra=unknown_fields("job json", raw, known.JOB_JSON),
    )


def node_from_json(raw: Mapping[str, Any]) -> SlurmNode:
    """A node of ``GET /slurm/vX/nodes`` or ``sinfo --json``."""
    d = Fields(raw)
    base, flags = split_node_state(d.value("state"), d.strings("state_flags"))
    used = d.value("gres_used")
    return SlurmNode(
        name=clean(d.value("name")),
        state=base,
        flags=flags,
        partitions=tuple(d.strings("partitions")),
        gres=parse_gres(d.value("gres")),
        gres_used=parse_gres(used) if used is not None else None,
        gres_drained=parse_gres(d.value("gres_drained")),
        cfg_tres=parse_tres(d.value("tres")),
        alloc_tres=parse_tres(d.value("tres_used")),
        reason=clean(d.value("reason")),
        extra=unknown_fields("node json", raw, known.NODE_JSON),
    )


def tres_list(items: list[Fields]) -> dict[str, str]:
    """``[{"type": "gres", "name": "gpu:a100", "count": 2}, ...]`` -> TRES dict."""
    out: dict[str, str] = {}
    for item in items:
        kind = clean(item.value("type"))
        name = clean(item.value("name"))
        if item.value("count") is None or not kind:
            continue
        out[f"{kind}/{name}" if name else kind] = str(_num(item, "count"))
    return out


def acct_from_json(raw: Mapping[str, Any]) -> SlurmAcct:
    """A job of ``GET /slurmdb/vX/jobs`` or ``sacct --json``."""
    d = Fields(raw)
    state, comment = d.value("state"), d.value("comment")
    t, tres = d.obj("time"), d.obj("tres")
    return SlurmAcct(
        job_id=str(_num(d, "job_id")),
        name=clean(d.value("name")),
        account=clean(d.value("account")),
        partition=clean(d.value("partition")),
        state=job_state_base(d.obj("state").value("current") if isinstance(state, dict) else state),
        alloc_tres=tres_list(tres.objs("allocated")),
        req_tres=tres_list(tres.objs("requested")),
        elapsed_s=_num(t, "elapsed"),
        started_at=_when(t, "start"),
        ended_at=_when(t, "end"),
        comment=_text(d.obj("comment").value("job") if isinstance(comment, dict) else comment),
        nodes=expand_hostlist(d.value("nodes")),
        user=clean(d.value("user")),
        extra=_acct_json_extra(raw),
    )


_ACCT_NESTED = {
    "time": known.ACCT_JSON_TIME,
    "state": known.ACCT_JSON_STATE,
    "tres": known.ACCT_JSON_TRES,
    "comment": known.ACCT_JSON_COMMENT,
}


def _acct_json_extra(d: Mapping[str, Any]) -> dict[str, str]:
    """Unknown members of an accounting job and of the objects in it that are read."""
    extra = unknown_fields("acct json", d, known.ACCT_JSON)
    for key, names in _ACCT_NESTED.items():
        if isinstance(d.get(key), dict):
            nested = unknown_fields(f"acct json {key}", d[key], names)
            extra.update({f"{key}.{name}": raw for name, raw in nested.items()})
    return extra
