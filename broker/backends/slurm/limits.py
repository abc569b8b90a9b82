"""Slurm's admission limits: QoS, association and partition, as ``LocalLimits``.

Read with three commands (argument lists, through the transport's bounded runner):
``sacctmgr show qos`` and ``sacctmgr show associations`` (slurmdbd: MaxTRESPerJob,
GrpTRES, GrpJobs, MaxWall) and ``scontrol show partition`` (slurmctld: MaxNodes, MaxTime
and the partition's own QoS).  What the GPU group limits use now comes from the running
jobs the backend already lists.  The output formats are the same on 22.05 and 24.11
(``--parsable2`` with an explicit ``format=``; ``--oneliner`` key=value).

With priority/multifactor and a fair-share weight, ``scontrol show config`` and ``sshare``
also give each account's fair-share factor: the order Slurm takes waiting jobs in.

Scopes: a QoS limit applies to every job when it is the QoS the broker submits with (the
config's ``default_qos``, else Slurm's ``normal``), else only to jobs of that QoS
(``qos:<name>``); an association's limits apply to its account's jobs (scope = account).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Mapping

from broker.local_limits import FairShare, GroupQuota, JobCap, LocalLimits
from broker.backends.slurm import parsers
from broker.backends.slurm.transport import SlurmJob

QOS_FORMAT = ("Name", "MaxTRESPerJob", "MaxWall", "GrpTRES", "GrpJobs")
ASSOC_FORMAT = ("Account", "User", "Partition", "MaxTRESPerJob", "GrpTRES", "GrpJobs")
QOS_CMD = ["sacctmgr", "--noheader", "--parsable2", "show", "qos", "format=" + ",".join(QOS_FORMAT)]
ASSOC_CMD = ["sacctmgr", "--noheader", "--parsable2", "show", "associations", "format=" + ",".join(ASSOC_FORMAT)]
PARTITION_CMD = ["scontrol", "--oneliner", "show", "partition"]
CONFIG_CMD = ["scontrol", "show", "config"]
SHARE_CMD = ["sshare", "--noheader", "--parsable2", "--all", "--format=Account,User,FairShare"]
SLURM_DEFAULT_QOS = "normal"


@dataclass(frozen=True)
class Row:
    """One QoS or association with the limits the broker reads."""

    name: str  # QoS name, or the association's account
    max_gpus: int | None = None  # MaxTRESPerJob gres/gpu
    max_wall_s: float | None = None
    grp_gpus: int | None = None  # GrpTRES gres/gpu
    grp_jobs: int | None = None


@dataclass(frozen=True)
class PartitionRow:
    name: str
    max_nodes: int | None = None
    max_time_s: float | None = None
    qos: str = ""


def slurm_duration_s(text: str) -> float | None:
    """[days-]hours:minutes:seconds, minutes:seconds, or minutes; UNLIMITED/empty: None."""
    text = text.strip()
    if not text or text.upper() in ("UNLIMITED", "INFINITE", "NONE", "N/A"):
        return None
    days, _, rest = text.rpartition("-")
    parts = [float(p) for p in rest.split(":")]
    # with days the first part is hours; without, a bare number is minutes
    units = (3600.0, 60.0, 1.0) if days or len(parts) == 3 else (60.0, 1.0)
    seconds = sum(v * u for v, u in zip(parts, units, strict=False))  # fewer parts: the low units
    return seconds + (float(days) * 86400 if days else 0.0)


def _gpus(tres: str) -> int | None:
    found = parsers.tres_gpus(parsers.parse_tres(tres)) if tres else 0
    return found if tres and "gres/gpu" in tres else None


def _count(text: str) -> int | None:
    return int(text) if text.strip().isdigit() else None


def parse_qos(text: str) -> list[Row]:
    rows = []
    for line in text.splitlines():
        f = line.split("|")
        if len(f) < len(QOS_FORMAT) or not f[0]:
            continue
        rows.append(Row(f[0], _gpus(f[1]), slurm_duration_s(f[2]), _gpus(f[3]), _count(f[4])))
    return rows


def parse_associations(text: str) -> list[Row]:
    """Account-level associations (no user, no partition) that set a limit the broker reads."""
    rows = []
    for line in text.splitlines():
        f = line.split("|")
        if len(f) < len(ASSOC_FORMAT) or not f[0] or f[1] or f[2]:
            continue
        row = Row(f[0], _gpus(f[3]), None, _gpus(f[4]), _count(f[5]))
        if (row.max_gpus, row.grp_gpus, row.grp_jobs) != (None, None, None):
            rows.append(row)
    return rows


def parse_partitions(text: str) -> list[PartitionRow]:
    rows = []
    for line in text.splitlines():
        kv = parsers.parse_kv_line(line)
        if "PartitionName" not in kv:
            continue
        qos = kv.get("QoS", "")
        rows.append(
            PartitionRow(
                kv["PartitionName"],
                _count(kv.get("MaxNodes", "")),
                slurm_duration_s(kv.get("MaxTime", "")),
                "" if qos in ("N/A", "(null)") else qos,
            )
        )
    return rows


def fairshare_weight(config_text: str) -> int:
    """``PriorityWeightFairShare`` of ``scontrol show config`` when the priority plugin is
    multifactor, else 0 (priority/basic orders by submission alone)."""
    values = {}
    for line in config_text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip().lower()] = value.strip()
    if values.get("prioritytype") != "priority/multifactor":
        return 0
    weight = values.get("priorityweightfairshare", "0")
    return int(weight) if weight.isdigit() else 0


def parse_shares(text: str, weight: int) -> list[FairShare]:
    """Each account's factor: the highest of its users' (sshare's user rows; Fair Tree ranks
    an account's users together, so its best-placed member is where its jobs stand)."""
    best: dict[str, float] = {}
    for line in text.splitlines():
        f = line.split("|")
        if len(f) < 3 or not f[1].strip():
            continue
        try:
            factor = float(f[2])
        except ValueError:
            continue
        account = f[0].strip()
        best[account] = max(best.get(account, 0.0), factor)
    source = f"(PriorityWeightFairshare={weight})"
    return [FairShare(f"fair share of account {a} {source}", a, f, f * weight) for a, f in sorted(best.items())]


def local_limits(
    qos: Iterable[Row],
    assocs: Iterable[Row],
    partitions: Iterable[PartitionRow],
    running: Iterable[SlurmJob],
    default_qos: str = "",
    shares: Iterable[FairShare] = (),
) -> LocalLimits:
    default_qos = default_qos or SLURM_DEFAULT_QOS
    by_qos = {q.name: q for q in qos}
    used = _use(running)
    caps: list[JobCap] = []
    quotas: list[GroupQuota] = []
    for part in partitions:
        if part.max_nodes is not None or part.max_time_s is not None:
            caps.append(
                JobCap(f"partition {part.name}", pool=part.name, max_nodes=part.max_nodes, max_time_s=part.max_time_s)
            )
        if part.qos in by_qos:
            caps += _caps(f"QoS {part.qos} of partition {part.name}", by_qos[part.qos], part.name, "")
    for q in by_qos.values():
        scope = "" if q.name == default_qos else f"qos:{q.name}"
        caps += _caps(f"QoS {q.name}", q, "", scope)
        quotas += _quota(f"QoS {q.name}", q, scope, used.get(("qos", q.name), (0, 0)))
    for a in assocs:
        caps += _caps(f"association {a.name}", a, "", a.name)
        quotas += _quota(f"association {a.name}", a, a.name, used.get(("account", a.name), (0, 0)))
    return LocalLimits(caps=tuple(caps), quotas=tuple(quotas), shares=tuple(shares))


def _caps(source: str, row: Row, pool: str, scope: str) -> list[JobCap]:
    if row.max_gpus is None and row.max_wall_s is None:
        return []
    text = f" (MaxTRESPerJob=gres/gpu={row.max_gpus})" if row.max_gpus is not None else ""
    return [JobCap(source + text, pool=pool, scope=scope, max_gpus=row.max_gpus, max_time_s=row.max_wall_s)]


def _quota(source: str, row: Row, scope: str, use: tuple[int, int]) -> list[GroupQuota]:
    if row.grp_gpus is None and row.grp_jobs is None:
        return []
    text = f" (GrpTRES=gres/gpu={row.grp_gpus})" if row.grp_gpus is not None else ""
    return [
        GroupQuota(
            source + text,
            scope=scope,
            limit_gpus=row.grp_gpus,
            used_gpus=use[0],
            max_jobs=row.grp_jobs,
            running_jobs=use[1],
        )
    ]


def _use(running: Iterable[SlurmJob]) -> Mapping[tuple[str, str], tuple[int, int]]:
    """(kind, name) -> (GPUs, jobs) of running jobs, per QoS and per account."""
    out: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for job in running:
        gpus = parsers.tres_gpus(job.tres)
        for key in (("qos", job.qos), ("account", job.account)):
            if key[1]:
                out[key][0] += gpus
                out[key][1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}


def read_limits(transport: object, running: Iterable[SlurmJob], default_qos: str = "") -> LocalLimits:
    """Through a command transport (its bounded ``query``), or over REST (its
    ``limit_rows``: the same limits, no fair share: slurmrestd does not say whether the
    cluster weighs it).  Raises Unavailable like any other read."""
    query = getattr(transport, "query", None)
    rows = getattr(transport, "limit_rows", None)
    if query is None and rows is not None:
        qos, assocs, parts = rows()
        return local_limits(qos, assocs, parts, running, default_qos)
    if query is None:
        return LocalLimits()
    weight = fairshare_weight(query(CONFIG_CMD))
    return local_limits(
        parse_qos(query(QOS_CMD)),
        parse_associations(query(ASSOC_CMD)),
        parse_partitions(query(PARTITION_CMD)),
        running,
        default_qos,
        parse_shares(query(SHARE_CMD), weight) if weight else (),
    )
