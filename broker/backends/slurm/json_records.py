"""Slurm's JSON (slurmrestd, and ``squeue/sinfo/sacct --json``) to the records of transport.py.

Pure functions, like parsers.py (whose text readers they share), kept apart so each module
reads as one format.  Both the 22.05 shapes (v0.0.38: plain numbers, state strings) and the
23.02+ shapes (v0.0.39+: ``{"set": true, "number": N}``, state lists) are accepted.
"""

from __future__ import annotations

from typing import Any, Mapping

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


def job_from_json(d: Mapping[str, Any]) -> SlurmJob:
    """A job of ``GET /slurm/vX/jobs`` or ``squeue --json``."""
    tres: Mapping[str, str] = parse_tres(d.get("tres_alloc_str")) or parse_tres(d.get("tres_req_str"))
    if not tres:
        fields = {"tres-per-node": clean(d.get("tres_per_node")), "NumNodes": str(number(d.get("node_count"), 0))}
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
        extra=unknown_fields("job json", d, known.JOB_JSON),
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
        extra=unknown_fields("node json", d, known.NODE_JSON),
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
        user=clean(d.get("user")),
        extra=_acct_json_extra(d),
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
