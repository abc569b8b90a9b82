"""Cloud bill import: parse the whole file first, then store it in one transaction.

A malformed file stores nothing; the same file (same sha256) imported twice is
recognised and not counted again; a line that matches no project is kept, unmatched.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from decimal import Decimal
from typing import BinaryIO, Iterable, Iterator

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from accounting.bills import BillLineData, BillParseError, parse_bill
from accounting.bills.base import tag_key
from accounting.conf import project_tags, setting, workload_tags
from accounting.models import BillImport, BillLine
from accounting.resolve import GpuClassResolver, ProjectRef, ProjectResolver
from broker.models import Cluster, GpuClass, Workload
from broker.services.records.audit import audit
from portal.tenancy.errors import DomainError
from portal.tenancy.models import Tenant


class BillRejected(DomainError):
    """The file is malformed; ``errors[0]`` is its first problem (each located in ``details``).
    Nothing was stored."""

    field = "file"

    def __init__(self, file_name: str, errors: list[BillParseError]):
        self.file_name, self.errors = file_name, errors
        self.details = tuple(errors)
        super().__init__(str(errors[0]))


@dataclass
class BillImportResult:
    bill: BillImport
    duplicate: bool

    @property
    def unmatched(self) -> int:
        return self.bill.line_count - self.bill.matched_count


def bill_import(
    *,
    provider: str,
    file_name: str,
    content: BinaryIO,
    tenant: Tenant | None = None,
    cluster: Cluster | None = None,
    actor: User | None = None,
) -> BillImportResult:
    """Import one bill file (seekable binary); raises BillRejected when it is malformed."""
    digest = _sha256(content)
    existing = BillImport.objects.filter(sha256=digest).first()
    if existing is not None:
        return BillImportResult(bill=existing, duplicate=True)
    outcome = parse_bill(
        _byte_lines(content),
        provider=provider,
        file_name=file_name,
        max_errors=int(setting("GPUBROKER_ACCOUNTING_MAX_BILL_ERRORS")),
    )
    if not outcome.ok:
        raise BillRejected(file_name, outcome.errors)
    try:
        bill = _store(
            provider=provider,
            file_name=file_name,
            digest=digest,
            tenant=tenant,
            cluster=cluster,
            actor=actor,
            lines=outcome.lines,
        )
    except IntegrityError:  # the same file won a race with us: it is the same bill
        return BillImportResult(bill=BillImport.objects.get(sha256=digest), duplicate=True)
    return BillImportResult(bill=bill, duplicate=False)


def _sha256(content: BinaryIO) -> str:
    h = hashlib.sha256()
    content.seek(0)
    for block in iter(lambda: content.read(1 << 20), b""):
        h.update(block)
    content.seek(0)
    return h.hexdigest()


def _byte_lines(content: BinaryIO) -> Iterator[bytes]:
    content.seek(0)
    yield from content


@transaction.atomic
def _store(
    *,
    provider: str,
    file_name: str,
    digest: str,
    tenant: Tenant | None,
    cluster: Cluster | None,
    actor: User | None,
    lines: list[BillLineData],
) -> BillImport:
    rows = list(_match_lines(lines, tenant_id=tenant.id if tenant else None))
    starts = [line.usage_start for line in lines]
    bill = BillImport.objects.create(
        provider=provider,
        tenant=tenant,
        cluster=cluster,
        file_name=file_name[:255],
        sha256=digest,
        uploaded_by=actor if getattr(actor, "pk", None) else None,
        line_count=len(rows),
        matched_count=sum(1 for r in rows if r.project_id),
        total_cost=sum((r.cost for r in rows), Decimal("0")).quantize(Decimal("0.0001")),
        currency=next((line.currency for line in lines if line.currency), ""),
        period_start=min(starts, default=None),
        period_end=max(starts, default=None),
    )
    for row in rows:
        row.bill = bill
    BillLine.objects.bulk_create(rows, batch_size=2000)
    audit(
        action="accounting.bill_import",
        tenant_id=tenant.id if tenant else None,
        actor=actor,
        cluster=cluster.name if cluster else "",
        message=f"{file_name}: {bill.line_count} lines, {bill.matched_count} matched",
        inputs={"provider": provider, "file_name": file_name, "sha256": digest},
    )
    return bill


def _match_lines(lines: Iterable[BillLineData], *, tenant_id: int | None) -> Iterator[BillLine]:
    """Tags -> workload and project; a tenant's bill only ever charges that tenant's projects."""
    lines = list(lines)
    projects, classes = ProjectResolver(tenant_id=tenant_id), GpuClassResolver()
    uids = {_tag(line.tags, workload_tags()) for line in lines} - {""}
    workloads = Workload.objects.filter(uid__in=uids)
    if tenant_id is not None:
        workloads = workloads.filter(tenant_id=tenant_id)
    columns = ("uid", "id", "project_id", "tenant_id", "gpu_class_id")
    by_uid = {uid: _Billed(*row) for uid, *row in workloads.values_list(*columns)}
    class_map = _bill_class_map()
    for line in lines:
        uid = _tag(line.tags, workload_tags())
        wl = by_uid.get(uid)
        ref = projects.for_tag(_tag(line.tags, project_tags()))
        project_id, tenant = _owner(wl, ref)
        # an unmatched line of a tenant's own bill is still that tenant's cost, unassigned
        tenant = tenant or tenant_id
        yield BillLine(
            line_no=line.line_no,
            usage_start=line.usage_start,
            resource_id=line.resource_id[:500],
            description=line.description[:500],
            usage_amount=line.usage_amount,
            cost=line.cost,
            currency=line.currency,
            tags=line.tags,
            tenant_id=tenant,
            project_id=project_id,
            workload_id=wl.id if wl else None,
            workload_uid=uid[:40],
            gpu_class_id=(wl.gpu_class_id if wl else None) or _bill_class(line.description, class_map, classes),
        )


@dataclass(frozen=True)
class _Billed:
    """The broker workload a bill line's tag names: the columns the line takes from it."""

    id: int
    project_id: int
    tenant_id: int
    gpu_class_id: int | None


def _owner(wl: _Billed | None, ref: ProjectRef | None) -> tuple[int | None, int | None]:
    # the workload knows its project for certain; a project tag is the next best thing
    if wl:
        return wl.project_id, wl.tenant_id
    if ref:
        return ref.id, ref.tenant_id
    return None, None


def _tag(tags: dict[str, str], keys: tuple[str, ...]) -> str:
    wanted = {tag_key(k) for k in keys}
    return next((v for k, v in tags.items() if tag_key(k) in wanted and v), "")


def _bill_class_map() -> dict[str, int]:
    """Site setting: instance type / SKU text -> GPU class slug (e.g. 'p4d.' -> 'a100-40gb')."""
    wanted = dict(setting("GPUBROKER_ACCOUNTING_BILL_GPU_CLASSES"))
    ids = dict(GpuClass.objects.filter(slug__in=wanted.values()).values_list("slug", "id"))
    return {text.lower(): ids[slug] for text, slug in wanted.items() if slug in ids}


def _bill_class(description: str, class_map: dict[str, int], classes: GpuClassResolver) -> int | None:
    text = description.lower()
    hit = next((gc for key, gc in class_map.items() if key in text), None)
    return hit or classes.for_model(description)
