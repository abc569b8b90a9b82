"""SlurmBackend: the Backend protocol over one Slurm cluster, through a Transport."""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Iterator, Sequence

from broker import preflight
from broker.cluster_report import Levels
from broker.backends.base import (
    BackendError,
    DestinationJob,
    InventorySnapshot,
    JobOutcome,
    LogPage,
    NodeInventory,
    PoolInventory,
    ProjectIdentity,
    QueueStats,
    Unavailable,
    UsageRecord,
)
from broker.local_limits import LocalLimits
from broker.backends.slurm import parsers, shards
from broker.backends.slurm.limits import read_limits
from broker.backends.slurm.config import SlurmConfig
from broker.backends.slurm.mapping import SHARD, SubmitRequest, build_request
from broker.backends.slurm.metrics import NodeGpus, NodeMetrics
from broker.backends.slurm.outcome import outcome as end_outcome
from broker.backends.slurm.output import OutputReader, output_path, output_pattern
from broker.backends.slurm.transport import SlurmAcct, SlurmJob, SlurmNode, Transport
from broker.spec import MIG_PROFILE_RE, WorkloadSpec

log = logging.getLogger(__name__)

ACTIVE_STATES = (
    "PENDING",
    "RUNNING",
    "CONFIGURING",
    "COMPLETING",
    "SUSPENDED",
    "REQUEUED",
    "RESIZING",
    "SIGNALING",
    "STAGE_OUT",
    "STOPPED",
)


@dataclass(frozen=True)
class AccountStatus:
    """What ensure_account found or did."""

    account: str
    exists: bool
    created: bool = False
    missing_users: tuple[str, ...] = ()
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.exists and not self.missing_users


def _split_type(gres_type: str) -> tuple[str, str]:
    """GRES type -> (gpu model, partitioning): "a100" -> (a100, whole);
    "1g.10gb" -> ("", 1g.10gb); "a100_1g.10gb" -> (a100, 1g.10gb)."""
    t = gres_type.lower()
    if MIG_PROFILE_RE.match(t):
        return "", t
    for sep in ("_", "-", ":"):
        head, _, tail = t.rpartition(sep)
        if head and MIG_PROFILE_RE.match(tail):
            return head, tail
    return t, "whole"


class SlurmBackend:
    kind = "slurm"

    def __init__(
        self,
        cluster: str,
        transport: Transport,
        config: SlurmConfig | None = None,
        output_reader: OutputReader | None = None,
        node_metrics: NodeMetrics | None = None,
    ):
        self.cluster = cluster
        self.transport = transport
        self.config = config or SlurmConfig()
        self.output_reader = output_reader  # None: this cluster's output files are out of reach
        self.node_metrics = node_metrics  # slurmctld's OpenMetrics (config metrics_url), if any
        self._known_types: frozenset[str] | None = None

    # ------------------------------------------------------------ conversions
    def _gpu_memory(self, gres_type: str) -> int:
        model, part = _split_type(gres_type)
        if part != "whole":
            return int(part.split(".")[1].rstrip("gb") or 0)
        return int(self.config.gpu_memory_gb.get(model, 0))

    def _model_name(self, gres_type: str, model: str) -> str:
        names = self.config.model_names
        return names.get(gres_type) or names.get(model) or model

    def _job(self, job: SlurmJob) -> DestinationJob:
        state = parsers.map_job_state(job.state)
        return DestinationJob(
            job_id=job.job_id,
            workload_id=parsers.workload_id_of(job.name, job.comment),
            state=state,
            reason=parsers.job_reason(state, job.reason),
            raw_reason="" if job.reason == "None" else job.reason,
            gpus=shards.tres_units(job.tres),
            nodes=job.nodes,
            started_at=job.started_at,
            ended_at=job.ended_at if state.ended else None,
            outcome=end_outcome(job.state, reason=job.reason) if state.ended else None,
        )

    def _acct_job(self, rec: SlurmAcct) -> DestinationJob:
        state = parsers.map_job_state(rec.state)
        return DestinationJob(
            job_id=rec.job_id,
            workload_id=parsers.workload_id_of(rec.name, rec.comment),
            state=state,
            gpus=shards.tres_units(rec.alloc_tres) or shards.tres_units(rec.req_tres),
            nodes=rec.nodes,
            started_at=rec.started_at,
            ended_at=rec.ended_at if state.ended else None,
            outcome=end_outcome(rec.state) if state.ended else None,
        )

    # ------------------------------------------------------------ inventory
    def _node_inventories(
        self, node: SlurmNode, counted: NodeGpus | None, topology: Levels = ()
    ) -> list[tuple[str, NodeInventory]]:
        """(gres type, NodeInventory) per GPU type on the node; ``counted``: slurmctld's
        OpenMetrics figures for it, which give the allocation of a node of one GPU type;
        ``topology``: its switches or block (``scontrol show topology``)."""
        healthy, draining = parsers.node_health(node)
        gpus = parsers.gpu_items(node.gres)
        if not gpus:
            return []
        by_type: dict[str, int] = defaultdict(int)
        for item in gpus:
            by_type[item.type] += item.count
        drained: dict[str, int] = defaultdict(int)
        for item in parsers.gpu_items(node.gres_drained):
            drained[item.type] += item.count
        used: dict[str, int] = defaultdict(int)
        if node.gres_used is not None:
            for item in parsers.gpu_items(node.gres_used):
                used[item.type] += item.count
        else:
            typed = parsers.tres_gpu_types(node.alloc_tres)
            for t in by_type:
                if t in typed:
                    used[t] = typed[t]
            if len(by_type) == 1 and not typed:
                used[next(iter(by_type))] = parsers.tres_gpus(node.alloc_tres)
        if counted is not None and len(by_type) == 1:
            used = {next(iter(by_type)): counted.allocated}
        out = []
        for gtype, total in sorted(by_type.items()):
            model, partitioning = _split_type(gtype)
            out.append(
                (
                    gtype,
                    NodeInventory(
                        name=node.name,
                        gpu_model=self._model_name(gtype, model),
                        gpu_memory_gb=self._gpu_memory(gtype),
                        gpus_total=total,
                        gpus_allocatable=max(0, total - drained.get(gtype, 0)),
                        gpus_allocated=min(total, used.get(gtype, 0)),
                        partitioning=partitioning,
                        healthy=healthy,
                        draining=draining,
                        health_reason=parsers.node_health_reason(node, drained.get(gtype, 0)),
                        interconnect_domain=self.config.interconnect_domain,
                        owner=self.config.owner,
                        topology=topology,
                    ),
                )
            )
        return shards.with_shards(node, out)

    def inventory(self) -> InventorySnapshot:
        taken_at = datetime.now(timezone.utc)
        nodes = self.transport.nodes()
        topology = self.transport.topology()
        counted = self.node_metrics.read() if self.node_metrics else None
        wanted = set(self.config.partitions)
        pools: dict[tuple[str, str], list[NodeInventory]] = defaultdict(list)
        types: set[str] = set()
        for node in nodes:
            for gtype, inv in self._node_inventories(node, (counted or {}).get(node.name), topology.get(node.name, ())):
                if gtype != SHARD:  # a GPU type a spec may name; shards are asked as such
                    types.add(gtype)
                for partition in node.partitions:
                    if wanted and partition not in wanted:
                        continue
                    pools[(partition, gtype)].append(inv)
        if types:
            self._known_types = frozenset(types)
        pool_list = []
        for (partition, gtype), invs in sorted(pools.items()):
            first = invs[0]
            pool_list.append(
                PoolInventory(
                    name=f"{partition}/{gtype or 'gpu'}",
                    gpu_model=first.gpu_model,
                    gpu_memory_gb=first.gpu_memory_gb,
                    partitioning=first.partitioning,
                    owner=self.config.owner,
                    nodes=tuple(sorted(invs, key=lambda n: n.name)),
                )
            )
        return InventorySnapshot(
            cluster=self.cluster,
            taken_at=taken_at,
            pools=tuple(pool_list),
            queue=self._queue_stats(taken_at),
            limits=self._limits(),
        )

    def _limits(self) -> LocalLimits:
        """QoS, association and partition limits (best effort, as throughput: slurmdbd may be
        down while slurmctld answers, and the nodes are worth reporting without them)."""
        try:
            running = self.transport.jobs(states=("RUNNING",))
            return read_limits(self.transport, running, self.config.default_qos)
        except Unavailable as exc:
            log.warning("slurm %s: local limits not known: %s", self.cluster, exc)
            return LocalLimits()

    def _queue_stats(self, now: datetime) -> QueueStats:
        wanted = set(self.config.partitions)
        pending = [
            j
            for j in self.transport.jobs(states=("PENDING",))
            if parsers.tres_gpus(j.tres) > 0 and (not wanted or not j.partition or set(j.partition.split(",")) & wanted)
        ]
        by_account: dict[str, int] = {}
        for job in pending:
            by_account[job.account] = by_account.get(job.account, 0) + parsers.tres_gpus(job.tres)
        return QueueStats(
            pending_jobs=len(pending),
            pending_gpus=sum(by_account.values()),
            gpu_hours_per_hour=self._throughput(now),
            pending_gpus_by_scope=tuple(sorted((a, g) for a, g in by_account.items() if a)),
        )

    def _throughput(self, now: datetime) -> float:
        """GPU-hours delivered per hour over the last throughput_window_s (best effort:
        accounting may be down while slurmctld answers)."""
        window = self.config.throughput_window_s
        if window <= 0:
            return 0.0
        start = now - timedelta(seconds=window)
        total = 0.0
        try:
            for rec in self.transport.accounting(since=start):
                gpus = parsers.tres_gpus(rec.alloc_tres)
                if not gpus or rec.started_at is None:
                    continue
                begin = max(rec.started_at, start)
                end = min(rec.ended_at or now, now)
                if end > begin:
                    total += gpus * (end - begin).total_seconds()
        except Unavailable as exc:
            log.warning("slurm %s: throughput not known: %s", self.cluster, exc)
            return 0.0
        return round(total / window, 4)

    # ------------------------------------------------------------ jobs
    def build_request(self, spec: WorkloadSpec, workload_id: str, identity: ProjectIdentity) -> SubmitRequest:
        return build_request(spec, workload_id, identity, self.config, self._known_types)

    def submit(self, spec: WorkloadSpec, workload_id: str, identity: ProjectIdentity) -> str:
        return self.transport.submit(self.build_request(spec, workload_id, identity))

    def find(self, workload_id: str) -> DestinationJob | None:
        return self.find_active(workload_id) or self.find_accounted(workload_id)

    @staticmethod
    def _best(jobs: list[DestinationJob]) -> DestinationJob | None:
        """Several jobs may carry one workload id (a retry after a failure): a live one
        first, else the newest."""
        if not jobs:
            return None
        live = [j for j in jobs if not j.state.ended]
        pool = live or jobs
        return max(
            pool,
            key=lambda j: (
                int(j.job_id.split("_")[0].split("+")[0]) if j.job_id.split("_")[0].split("+")[0].isdigit() else 0
            ),
        )

    def find_active(self, workload_id: str) -> DestinationJob | None:
        """From slurmctld (squeue / REST jobs): pending, running and recently ended jobs."""
        jobs = [
            self._job(j)
            for j in self.transport.jobs(names=[workload_id])
            if j.comment == workload_id or (not j.comment and j.name == workload_id)
        ]
        return self._best(jobs)

    def find_accounted(self, workload_id: str) -> DestinationJob | None:
        """From slurmdbd (sacct / REST slurmdb): jobs that left slurmctld's memory."""
        since = datetime.now(timezone.utc) - timedelta(days=self.config.find_lookback_days)
        jobs = [
            self._acct_job(r)
            for r in self.transport.accounting(since=since, names=[workload_id])
            if r.comment == workload_id or (not r.comment and r.name == workload_id)
        ]
        return self._best(jobs)

    def status(self, job_ids: Sequence[str]) -> dict[str, DestinationJob]:
        ids = [str(j) for j in dict.fromkeys(job_ids)]
        if not ids:
            return {}
        found = {j.job_id: self._job(j) for j in self.transport.jobs(job_ids=ids)}
        missing = [j for j in ids if j not in found]
        if missing:
            for rec in self.transport.accounting(job_ids=missing):
                if rec.job_id in missing:
                    found[rec.job_id] = self._acct_job(rec)
        self._add_exit_codes(found)
        return {j: found[j] for j in ids if j in found}

    def _add_exit_codes(self, found: dict[str, DestinationJob]) -> None:
        """Ended jobs get their exit code and end reason (best effort: without them the
        state alone still says how the job ended)."""
        ended = [j for j, job in found.items() if job.state.ended]
        job_ends = getattr(self.transport, "job_ends", None)
        if not ended or job_ends is None:
            return
        try:
            ends = job_ends(ended)
        except Unavailable as exc:
            log.warning("slurm %s: exit codes of %s not known: %s", self.cluster, ended, exc)
            return
        for job_id, end in ends.items():
            if job_id in found and end.state and parsers.map_job_state(end.state).ended:
                said = end_outcome(end.state, end.exit_code, end.signal, end.reason)
                if end.exit_code == preflight.CHECK_FAILED_EXIT:
                    said = self._checked(job_id, said)
                found[job_id] = replace(found[job_id], outcome=said)

    def _checked(self, job_id: str, said: JobOutcome) -> JobOutcome:
        """A job that ended with the pre-flight check's exit code: the worker and node its
        output names (every worker writes to the one output file), when that file is read
        here; as Slurm said it otherwise."""
        try:
            tail = self.logs(job_id, tail=50).lines
        except BackendError:
            return said
        found = preflight.failed_worker("\n".join(tail))
        if found is None:
            return said
        worker, node, what = found
        return replace(
            said, summary=preflight.summary(worker, node), end_reason=preflight.END_REASON, worker=worker, detail=what
        )

    def logs(
        self, job_id: str, *, worker: str = "", offset: int | None = None, limit: int = 200, tail: int | None = None
    ) -> LogPage:
        """The job's output file (one per job: every worker's lines are in it)."""
        if self.output_reader is None:
            raise BackendError(
                f"slurmrestd serves no files, and {self.cluster} has no logs_ssh_host or logs_prefix to read them with"
            )
        job = self.find_job_name(job_id)
        path = output_path(self.config, job_id, job, rest=self.transport.name == "rest")
        return self.output_reader.read(path, offset=offset, limit=limit, tail=tail)

    def find_job_name(self, job_id: str) -> str:
        """The job's name (the workload id) for %x in an output pattern; "" when unused."""
        if "%x" not in output_pattern(self.config):
            return ""
        job = self.status([job_id]).get(job_id)
        return (job.workload_id or "") if job else ""

    def active_jobs(self) -> list[DestinationJob]:
        return [self._job(j) for j in self.transport.jobs(states=ACTIVE_STATES) if shards.tres_units(j.tres) > 0]

    def cancel(self, job_id: str) -> bool:
        job_id = str(job_id)
        self.transport.cancel(job_id)
        deadline = time.monotonic() + self.config.cancel_confirm_s
        delay = 0.1
        while True:
            job = self.status([job_id]).get(job_id)
            if job is None:
                return False
            if job.state.ended:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    # ------------------------------------------------------------ accounting
    def usage(self, since: datetime) -> Iterator[UsageRecord]:
        """One record per job, every run of it counted: a job Slurm requeued (preempted
        with PreemptMode=REQUEUE) keeps its job id, so its runs are one ledger entry whose
        GPU-seconds are their sum, open until its latest run ends."""
        ratios = shards.ShardRatios(getattr(self.transport, "nodes", None))
        for runs in _runs_by_job(self.transport.accounting(since=since, every_run=True)):
            record = self._usage_record(runs, ratios)
            if record is not None:
                yield record

    def _usage_record(self, runs: list[SlurmAcct], ratios: shards.ShardRatios) -> UsageRecord | None:
        """A job of GPU shares (gres/shard) is charged its shares' part of a GPU."""
        units = [shards.tres_units(r.alloc_tres) for r in runs]
        ran = [(r, r.started_at, u) for r, u in zip(runs, units, strict=True) if r.started_at is not None]
        ran = [(r, at, gpus) for r, at, gpus in ran if gpus > 0]
        if not ran:
            return None
        # the latest run: one not started yet (queued again), else the last to start
        latest = next((r for r in runs if r.started_at is None), None) or max(ran, key=lambda x: x[1])[0]
        first, gpus = ran[0][0], max(g for _, _, g in ran)
        share = ratios.of(first, self.cluster)
        if not share:  # shards, and nothing says how many make a GPU: never charged as GPUs
            return None
        gtype = parsers.tres_gpu_model(first.alloc_tres)
        state = parsers.map_job_state(latest.state)
        return UsageRecord(
            source="slurm",
            cluster=self.cluster,
            job_id=first.job_id,
            workload_id=parsers.workload_id_of(latest.name, latest.comment or first.comment),
            account=first.account,
            gpu_model=self._model_name(gtype, _split_type(gtype)[0]) if gtype else "",
            gpus=gpus,
            start=min(at for _, at, _ in ran),
            end=latest.ended_at if state.ended else None,
            gpu_seconds=round(sum(g * max(0, r.elapsed_s) for r, _, g in ran) / share),
            state=latest.state,
            user=first.user,
        )

    def ensure_account(
        self,
        account: str,
        users: Sequence[str] = (),
        *,
        create: bool = False,
        description: str = "",
        organization: str = "",
    ) -> AccountStatus:
        """Check that ``account`` (and each user's association with it) exists in
        slurmdbd; with ``create`` add what is missing (sacctmgr; CommandTransport only)."""
        assocs = self.transport.associations(account)
        exists = bool(assocs)
        have = {a.user for a in assocs if a.user}
        missing = tuple(u for u in users if u not in have)
        if (exists and not missing) or not create:
            return AccountStatus(account, exists, missing_users=missing, detail="" if exists else "no such account")
        try:
            self.transport.add_account(account, users, description=description, organization=organization)
        except NotImplementedError as exc:
            return AccountStatus(account, exists, missing_users=missing, detail=str(exc))
        except BackendError:
            raise
        assocs = self.transport.associations(account)
        have = {a.user for a in assocs if a.user}
        missing = tuple(u for u in users if u not in have)
        return AccountStatus(account, bool(assocs), created=True, missing_users=missing)


__all__ = ["AccountStatus", "SlurmBackend"]


# a run in one of these states may be followed by another of the same job (Slurm requeued it)
_MAY_RUN_AGAIN = frozenset({"PREEMPTED", "REQUEUED", "NODE_FAIL"})


def _runs_by_job(records: Iterator[SlurmAcct]) -> Iterator[list[SlurmAcct]]:
    """Every run of a job together, streamed: sacct lists runs by when they started, so a
    requeued job's later run may come after other jobs.  Only runs that may be followed by
    another (preempted, requeued) wait for it; a job's runs come out with its latest."""
    held: dict[str, list[SlurmAcct]] = {}
    for rec in records:
        runs = [*held.pop(rec.job_id, ()), rec]
        if rec.state in _MAY_RUN_AGAIN:
            held[rec.job_id] = runs
        else:
            yield runs
    yield from held.values()
