"""Slurm's admission limits as slurmrestd gives them: the rows ``limits.py`` reads from
``sacctmgr`` and ``scontrol``, from ``GET /slurmdb/vX/qos``, ``/slurmdb/vX/associations``
and ``/slurm/vX/partitions`` instead, so a cluster reached over REST alone (no commands on
the broker's host) reports its QoS, association and partition limits too.

Two shapes: QoS and associations nest their limits alike in every version
(``limits.max.tres.per.job``, ``max.tres.total``); v0.0.40 and later wrap numbers
(``{"set", "infinite", "number"}``) and nest a partition's (``maximums.time``,
``qos.assigned``), where 22.05's v0.0.38 names them flat (``max_time_limit``,
``maximum_nodes_per_job``, ``qos``; -1 for none).  Both are read here, each
checked on the captured replies of every version CI runs
(``tests/broker/backends/slurm/fixtures/<version>/rest-*-{qos,associations,partitions}.json``).
Times are minutes in every version.
"""

from __future__ import annotations

from typing import Any, Mapping

from broker.backends.json_fields import Fields
from broker.backends.slurm import parsers
from broker.backends.slurm.json_records import tres_list
from broker.backends.slurm.limits import PartitionRow, Row
from broker.backends.slurm.values import clean, number

_NO_LIMIT = 0xFFFFFFFE  # NO_VAL - 1 and above: Slurm's "unlimited" / "not set" in plain numbers


def _limit(value: Any) -> int | None:
    """A count or minutes; None where Slurm says none (unset, infinite, NO_VAL)."""
    if value is None or value == "":
        return None
    found = number(value, -1)
    return None if found < 0 or found >= _NO_LIMIT else found


def _minutes_s(value: Any) -> float | None:
    found = _limit(value)
    return None if found is None else found * 60.0


def _gpus(items: list[Fields]) -> int | None:
    """GPUs of a TRES list, None where the list sets no GPU limit."""
    tres = tres_list(items)
    return parsers.tres_gpus(tres) if any(k.startswith("gres/gpu") for k in tres) else None


def qos_rows(payload: Mapping[str, Any]) -> list[Row]:
    rows = []
    reply = Fields(payload)
    for d in reply.objs("qos") or reply.objs("QOS"):  # v0.0.38 says "QOS"
        name = clean(d.value("name"))
        if not name:
            continue
        top = d.obj("limits", "max")
        rows.append(
            Row(
                name,
                max_gpus=_gpus(top.obj("tres", "per").objs("job")),
                max_wall_s=_minutes_s(top.obj("wall_clock", "per").value("job")),
                grp_gpus=_gpus(top.obj("tres").objs("total")),
                grp_jobs=_limit(top.obj("active_jobs").value("count")),
            )
        )
    return rows


def association_rows(payload: Mapping[str, Any]) -> list[Row]:
    """Account-level associations (no user, no partition) that set a limit the broker reads."""
    rows = []
    for d in Fields(payload).objs("associations"):
        account = clean(d.value("account"))
        if not account or clean(d.value("user")) or clean(d.value("partition")):
            continue
        top = d.obj("max")
        row = Row(
            account,
            max_gpus=_gpus(top.obj("tres", "per").objs("job")),
            grp_gpus=_gpus(top.obj("tres").objs("total")),
            grp_jobs=_limit(top.obj("jobs", "per").value("count")),
        )
        if (row.max_gpus, row.grp_gpus, row.grp_jobs) != (None, None, None):
            rows.append(row)
    return rows


def partition_rows(payload: Mapping[str, Any]) -> list[PartitionRow]:
    rows = []
    for d in Fields(payload).objs("partitions"):
        name = clean(d.value("name"))
        if not name:
            continue
        if "maximums" in d.raw:  # v0.0.40+
            most = d.obj("maximums")
            nodes, minutes, qos = most.value("nodes"), most.value("time"), d.obj("qos").value("assigned")
        else:  # v0.0.38: flat, -1 for none
            nodes, minutes, qos = d.value("maximum_nodes_per_job"), d.value("max_time_limit"), d.value("qos")
        rows.append(PartitionRow(name, max_nodes=_limit(nodes), max_time_s=_minutes_s(minutes), qos=clean(qos)))
    return rows
