"""The usage ledger: idempotent, streaming ingest of scheduler records, and collection.

Records arrive as an iterator (possibly millions of sacct lines) and are written in
chunks: each chunk is one transaction that inserts new jobs, updates jobs that were
still running, and moves the cluster's watermark, so a crash half-way leaves the
ledger and watermark consistent and a rerun adds nothing twice.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone as dt_timezone
from itertools import islice
from typing import Callable, Iterable, Iterator

from django.contrib.auth.models import User
from django.db import connection, transaction

from accounting.conf import chunk_size, setting
from accounting.models import UsageEntry, UsageWaiver, UsageWatermark
from accounting.resolve import GpuClassResolver, PersonResolver, ProjectResolver
from broker.backends.base import Unavailable, UsageRecord
from broker.backends.registry import backend_for
from broker.models import Cluster, Workload
from broker.services.records.audit import audit
from broker import runtime


@dataclass
class IngestReport:
    cluster: str
    records: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    unmatched_accounts: Counter[str] = field(default_factory=Counter)
    max_end: datetime | None = None

    @property
    def discrepancies(self) -> list[str]:
        return [
            f"account {account!r} matches no project ({n} job(s))"
            for account, n in sorted(self.unmatched_accounts.items())
        ]


@dataclass
class CollectReport:
    cluster: str
    stale: bool
    since: datetime | None = None
    error: str = ""
    ingest: IngestReport | None = None


@dataclass
class _Context:
    cluster: Cluster
    projects: ProjectResolver
    classes: GpuClassResolver
    report: IngestReport
    people: PersonResolver


def usage_ingest(*, cluster: Cluster, records: Iterable[UsageRecord], actor: User | None = None) -> IngestReport:
    """Add scheduler records to the ledger; re-reading the same period adds nothing.

    Deliberately not one transaction: each chunk commits on its own so a million-line
    read streams in bounded memory (a caller may still wrap the whole call)."""
    report = IngestReport(cluster=cluster.name)
    ctx = _Context(cluster, ProjectResolver(), GpuClassResolver(), report, PersonResolver())
    for chunk in _chunks(records, chunk_size()):
        _write_chunk(ctx, chunk)
    audit(
        action="accounting.usage_ingest",
        actor=actor,
        cluster=cluster.name,
        message=f"{report.created} new, {report.updated} updated, {report.unchanged} unchanged",
        inputs={"records": report.records, "unmatched_accounts": dict(report.unmatched_accounts)},
    )
    return report


def usage_collect(*, cluster_id: int, actor: User | None = None) -> CollectReport:
    """Read the cluster's usage since its watermark and ingest it.

    A cluster that does not answer is stale: nothing is written, so none of its jobs is
    charged as ended until a later collection hears from it (invariant 5)."""
    cluster = Cluster.objects.get(id=cluster_id)
    since = collect_since(cluster)
    try:
        with transaction.atomic():  # an Unavailable half-way through rolls back every chunk
            records = backend_for(cluster).usage(since=since)
            ingest = usage_ingest(cluster=cluster, records=records, actor=actor)
            UsageWatermark.objects.filter(cluster=cluster).update(last_collected_at=runtime.now())
    except Unavailable as exc:
        return CollectReport(cluster=cluster.name, stale=True, since=since, error=str(exc))
    return CollectReport(cluster=cluster.name, stale=False, since=since, ingest=ingest)


def collect_since(cluster: Cluster) -> datetime:
    mark = UsageWatermark.objects.filter(cluster=cluster).values_list("last_end", flat=True).first()
    if mark is None:
        return runtime.now() - timedelta(days=int(setting("GPUBROKER_ACCOUNTING_FIRST_LOOKBACK_DAYS")))
    # schedulers write some records late; the overlap is free because ingest is idempotent
    return mark - timedelta(seconds=int(setting("GPUBROKER_ACCOUNTING_OVERLAP_S")))


def _chunks(records: Iterable[UsageRecord], size: int) -> Iterator[list[UsageRecord]]:
    it = iter(records)
    while chunk := list(islice(it, size)):
        yield chunk


@transaction.atomic
def _write_chunk(ctx: _Context, chunk: list[UsageRecord]) -> None:
    ctx.report.records += len(chunk)
    latest = _dedupe(chunk)
    existing = _existing(ctx.cluster, latest)
    fresh = [r for key, r in latest.items() if key not in existing]
    ctx.report.unchanged += len(chunk) - len(latest)
    _update_running(ctx, latest, existing)
    if fresh:
        ctx.report.created += _insert(_new_rows(ctx, fresh))
        _apply_waivers(ctx.cluster, [r.job_id for r in fresh])
    _advance_watermark(ctx, chunk)


def usage_waive(*, cluster: Cluster, job_id: str, reason: str) -> None:
    """Charge nobody for one scheduler job, whether its usage is in the ledger yet or not (a
    job that ended because its pre-flight GPU check failed)."""
    UsageWaiver.objects.get_or_create(cluster=cluster, job_id=job_id, defaults={"reason": reason[:300]})
    UsageEntry.objects.filter(cluster=cluster, job_id=job_id).update(waived=True)


def _apply_waivers(cluster: Cluster, job_ids: list[str]) -> None:
    waived = UsageWaiver.objects.filter(cluster=cluster, job_id__in=job_ids).values_list("job_id", flat=True)
    if waived:
        UsageEntry.objects.filter(cluster=cluster, job_id__in=list(waived)).update(waived=True)


def _dedupe(chunk: list[UsageRecord]) -> dict[tuple[str, str], UsageRecord]:
    """One record per job; an ended record beats a running one, else the last wins."""
    latest: dict[tuple[str, str], UsageRecord] = {}
    for r in chunk:
        key = (r.source, r.job_id)
        seen = latest.get(key)
        if seen is None or seen.end is None or r.end is not None:
            latest[key] = r
    return latest


_Row = tuple[str | int | None, ...]  # a new row of the ledger, in _COLUMNS order
_Stored = tuple[int, datetime | None, int]  # a stored row of the ledger: id, end, GPU-seconds


def _existing(cluster: Cluster, latest: dict[tuple[str, str], UsageRecord]) -> dict[tuple[str, str], _Stored]:
    by_source: dict[str, list[str]] = {}
    for source, job_id in latest:
        by_source.setdefault(source, []).append(job_id)
    found: dict[tuple[str, str], _Stored] = {}
    for source, job_ids in by_source.items():
        rows = UsageEntry.objects.filter(cluster=cluster, source=source, job_id__in=job_ids)
        for job_id, pk, end, secs in rows.values_list("job_id", "id", "end", "gpu_seconds"):
            found[(source, job_id)] = (pk, end, secs)
    return found


def _update_running(
    ctx: _Context, latest: dict[tuple[str, str], UsageRecord], existing: dict[tuple[str, str], _Stored]
) -> None:
    """Only a row still running may change; an ended row is final (append-only ledger)."""
    changed = []
    now = runtime.now()
    for key, (pk, end, secs) in existing.items():
        r = latest[key]
        if end is not None or (r.end is None and r.gpu_seconds == secs):
            ctx.report.unchanged += 1
            continue
        changed.append(
            UsageEntry(id=pk, end=r.end, gpu_seconds=r.gpu_seconds, gpus=r.gpus, state=r.state, updated_at=now)
        )
    if changed:
        UsageEntry.objects.bulk_update(changed, ["end", "gpu_seconds", "gpus", "state", "updated_at"])
        ctx.report.updated += len(changed)


_COLUMNS = (
    "source",
    "cluster_id",
    "job_id",
    "workload_uid",
    "workload_id",
    "account",
    "tenant_id",
    "project_id",
    "gpu_model",
    "gpu_class_id",
    "gpus",
    "start",
    "end",
    "gpu_seconds",
    "state",
    "ingested_at",
    "updated_at",
    "cluster_user",
    "user_id",
)


def _new_rows(ctx: _Context, fresh: list[UsageRecord]) -> list[_Row]:
    workloads = _workloads_for(ctx.cluster, fresh)
    db_time = _time_adapter()
    stamp = db_time(runtime.now())
    rows: list[_Row] = []
    for r in fresh:
        wl = workloads.get(("uid", r.workload_id)) or workloads.get(("job", r.job_id))
        project_id, tenant_id = _owner(ctx, r, wl)
        gpu_class_id = (wl.gpu_class_id if wl else None) or ctx.classes.for_model(r.gpu_model)
        rows.append(
            (
                r.source,
                ctx.cluster.id,
                r.job_id,
                (r.workload_id or "")[:40],
                wl.id if wl else None,
                r.account[:100],
                tenant_id,
                project_id,
                r.gpu_model[:100],
                gpu_class_id,
                r.gpus,
                db_time(r.start),
                db_time(r.end),
                max(0, r.gpu_seconds),
                r.state[:40],
                stamp,
                stamp,
                r.user[:100],
                _person(ctx, r, wl),
            )
        )
    return rows


def _person(ctx: _Context, r: UsageRecord, wl: _Charged | None) -> int | None:
    """Who is charged: the broker knows who submitted its own workloads (whatever user the
    job ran as: the project account or theirs); other jobs by the cluster user's identity."""
    if wl is not None and wl.submitted_by_id:
        return wl.submitted_by_id
    return ctx.people.for_cluster_user(r.user)


def _owner(ctx: _Context, r: UsageRecord, wl: _Charged | None) -> tuple[int | None, int | None]:
    """The scheduler's account names the project; the broker's workload is the fallback."""
    ref = ctx.projects.for_account(r.account, source=r.source)
    if ref is not None:
        return ref.id, ref.tenant_id
    if wl is not None:
        return wl.project_id, wl.tenant_id
    ctx.report.unmatched_accounts[r.account] += 1
    return None, None


def _time_adapter() -> Callable[[datetime | None], str | None]:
    """Datetime -> database value, decided once per chunk (the connection is a proxy)."""
    if connection.vendor != "sqlite":
        adapt = connection.ops.adapt_datetimefield_value
        return lambda value: None if value is None else adapt(value)
    utc = dt_timezone.utc

    def naive_utc_text(value: datetime | None) -> str | None:
        # what Django's SQLite adapter stores (naive UTC text), without its per-call
        # time zone look-up, which costs more than the insert itself at a million rows
        return None if value is None else str(value.astimezone(utc).replace(tzinfo=None))

    return naive_utc_text


def _insert(rows: list[_Row]) -> int:
    """INSERT ... ON CONFLICT DO NOTHING with executemany (SQLite and PostgreSQL both speak it).

    Raw SQL on purpose: the ORM's bulk_create spends ~100 us a row preparing values, which
    is most of a million-line ingest; the unique constraint still guarantees idempotency."""
    table = connection.ops.quote_name(UsageEntry._meta.db_table)
    names = ", ".join(connection.ops.quote_name(c) for c in _COLUMNS)
    marks = ", ".join(["%s"] * len(_COLUMNS))
    with connection.cursor() as cursor:
        cursor.executemany(f"INSERT INTO {table} ({names}) VALUES ({marks}) ON CONFLICT DO NOTHING", rows)
    return len(rows)


@dataclass(frozen=True)
class _Charged:
    """The broker workload a usage line belongs to: the columns chargeback reads of it."""

    id: int
    project_id: int
    tenant_id: int
    gpu_class_id: int | None
    submitted_by_id: int | None


_CHARGED_FIELDS = ("id", "project_id", "tenant_id", "gpu_class_id", "submitted_by_id")


def _workloads_for(cluster: Cluster, fresh: list[UsageRecord]) -> dict[tuple[str, str | None], _Charged]:
    """Broker workloads by the id the job carried, else by the destination job id."""
    uids = {r.workload_id for r in fresh if r.workload_id}
    found: dict[tuple[str, str | None], _Charged] = {}
    if uids:
        for uid, *row in Workload.objects.filter(uid__in=uids).values_list("uid", *_CHARGED_FIELDS):
            found[("uid", uid)] = _Charged(*row)
    job_ids = [r.job_id for r in fresh if not r.workload_id]
    if job_ids:
        rows = Workload.objects.filter(cluster=cluster, destination_job_id__in=job_ids)
        for job_id, *row in rows.values_list("destination_job_id", *_CHARGED_FIELDS):
            found[("job", job_id)] = _Charged(*row)
    return found


def _advance_watermark(ctx: _Context, chunk: list[UsageRecord]) -> None:
    ends = [r.end for r in chunk if r.end is not None]
    if not ends:
        return
    top = max(ends)
    if ctx.report.max_end is None or top > ctx.report.max_end:
        ctx.report.max_end = top
    mark, created = UsageWatermark.objects.select_for_update().get_or_create(
        cluster=ctx.cluster, defaults={"last_end": top}
    )
    if not created and top > mark.last_end:
        mark.last_end = top
        mark.save(update_fields=["last_end"])
