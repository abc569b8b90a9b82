"""The writes of a placement pass, a chunk at a time.

A pass decides for each waiting workload in memory (``broker.services.placing.cycle``); what it
decided to place is written here in chunks: one transaction locks the quota rows of the
chunk once and reads their use once (``quota_ledger_lock``), locks the chunk's workloads,
writes every reservation in one statement, then moves each workload to ``reserved`` (the
conditional update of ``transitions``) and stores the chunk's audit records, the decisions
and the reservations, in one INSERT.  The
invariants are those of the one-at-a-time path: the quota rows are locked before their
use is read and stay locked until the reservations are committed; a workload no longer
placeable moves nowhere and holds nothing; dispatch is queued after the commit, one task
for the chunk (``broker.services.dispatching.chunk``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable

from django.db import transaction
from django.db.models import CharField, IntegerField, JSONField

from broker.lifecycle import PLACEABLE_STATES, TransitionReason
from broker.placement import Candidate
from broker.placement.record import PlacementRecord
from broker.models import AuditRecord, Cluster, GpuPool, Workload, WorkloadState
from broker.services.records import moves
from broker.services.records import tasks_bridge
from broker.services.records.audit import audit_many
from broker.services.records.bulk_moves import per_row
from broker.services.fleet.policy import LoadedPolicy
from broker.services.quota.reservations import QuotaExceeded, quota_ledger_lock
from broker.services.records.transitions import Note, moved_record

CHUNK = 50  # workloads per transaction: the quota rows stay locked for one chunk's writes


@dataclass(frozen=True)
class Decision:
    """A workload the pass chose a cluster for: what its move to ``reserved`` writes."""

    workload: Workload
    cluster: str
    record: PlacementRecord  # the workload's placement decision, choosing ``cluster``
    note: Note  # the decision's audit record
    policy_version: str
    ttl_s: int
    burst_gpus: int


class _ChunkLost(Exception):
    """A workload locked as placeable did not move: the chunk rolls back whole."""


@dataclass
class PassWriter:
    """Collects a pass's decisions and writes them ``CHUNK`` at a time.

    ``on_over(decision, exc)``: what the pass does with a workload its quota cannot hold
    after all (it waits, with the reason)."""

    now: datetime
    on_over: Callable[[Decision, QuotaExceeded], object]
    chunk: int = CHUNK
    placed: int = 0
    pending: list[Decision] = field(default_factory=list)
    clusters: dict[str, Cluster] = field(default_factory=dict)

    def add(self, decision: Decision) -> None:
        self.pending.append(decision)
        if len(self.pending) >= self.chunk:
            self.flush()

    def flush(self) -> None:
        decisions, self.pending = self.pending, []
        if not decisions:
            return
        self._load_clusters({d.cluster for d in decisions})
        over: list[tuple[Decision, QuotaExceeded]] = []
        moved = self._write(decisions, over)
        self.placed += moved
        for decision, exc in over:
            self.on_over(decision, exc)

    def _load_clusters(self, names: set[str]) -> None:
        missing = names - set(self.clusters)
        if missing:
            self.clusters.update((c.name, c) for c in Cluster.objects.filter(name__in=missing))

    @transaction.atomic
    def _write(self, decisions: list[Decision], over: list[tuple[Decision, QuotaExceeded]]) -> int:
        ids = [d.workload.id for d in decisions]
        keys = {(d.workload.tenant_id, d.workload.gpu_class_id) for d in decisions}
        ledger = quota_ledger_lock(keys=keys, workload_ids=ids, now=self.now)
        placeable = set(
            Workload.objects.select_for_update()
            .filter(id__in=ids, state__in=PLACEABLE_STATES, cancel_requested_at__isnull=True)
            .values_list("id", flat=True)
        )
        going = []
        for d in decisions:
            if d.workload.id not in placeable:
                continue  # moved on since the pass read it (cancelled, placed by an event)
            try:
                ledger.reserve(
                    workload=d.workload, cluster=self.clusters[d.cluster], ttl_s=d.ttl_s, burst_gpus=d.burst_gpus
                )
            except QuotaExceeded as exc:
                over.append((d, exc))
                continue
            going.append(d)
        created = ledger.store()  # the reservations' records: stored with the decisions' below
        if going:
            self._reserve(going, created)
            GpuPool.objects.filter(held_for__in=[d.workload.uid for d in going]).update(held_for="")
            # one dispatch task for the chunk (broker.services.dispatching.chunk), after the commit
            tasks_bridge.enqueue_dispatch_chunk([d.workload.id for d in going])
        return len(going)

    def _reserve(self, going: list[Decision], created: list[AuditRecord]) -> None:
        """Every workload of the chunk to ``reserved`` in one conditional update (each with its
        own cluster and record), and each one's decision record with its reservation's
        (``created``) in one INSERT."""
        by_id = {d.workload.id: d for d in going}
        moved = moves.reserve(
            where={"id__in": list(by_id), "cancel_requested_at__isnull": True},
            fields={
                "cluster_id": per_row(
                    "id", {i: self.clusters[d.cluster].id for i, d in by_id.items()}, IntegerField(), "cluster_id"
                ),
                "placement": per_row("id", {i: d.record.to_json() for i, d in by_id.items()}, JSONField(), "placement"),
                "policy_version": per_row(
                    "id", {i: d.policy_version for i, d in by_id.items()}, CharField(), "policy_version"
                ),
                "reason": "",
                "raw_reason": "",
            },
            note=None,
            savepoint=False,
        )
        if moved != len(going):
            raise _ChunkLost(f"{moved} of {len(going)} moved")  # locked above: only a bug gets here
        audit_many(
            created + [moved_record(d.note, to=WorkloadState.RESERVED, reason=TransitionReason.PLACED) for d in going]
        )


def decision_for(
    workload: Workload, best: Candidate, record: PlacementRecord, loaded: LoadedPolicy, quota_remaining: int
) -> Decision:
    """What placing ``workload`` on ``best`` writes (``record``: the decision choosing ``best``)."""
    return Decision(
        workload=workload,
        cluster=best.cluster,
        record=record,
        note=decided_note(workload, best, record, loaded.version, quota_remaining),
        policy_version=loaded.version,
        ttl_s=int(loaded.policy.reservation_ttl_s),
        burst_gpus=loaded.policy.tenant(workload.tenant.slug).burst_gpus,
    )


def decided_note(
    workload: Workload, best: Candidate, record: PlacementRecord, version: str, quota_remaining: int
) -> Note:
    """The audit record of a placement decision (one at a time or in a pass's chunk)."""
    return Note(
        action="placement.decided",
        workload=workload,
        policy_version=version,
        cluster=best.cluster,
        score_breakdown=best.to_dict(),
        inputs={
            "spec": workload.spec,
            "quota_remaining": quota_remaining,
            "candidates": record.candidates,
            "excluded": record.excluded_json(),
        },
        message=f"{best.cluster} / {best.pool}, score {best.score:.3f}"
        + (", to wait in its queue (nothing fits now)" if "queued_turnover_s" in best.detail else ""),
    )
