"""Bill import: matching by tags, duplicates, and malformed files storing nothing."""
from __future__ import annotations

import io
from decimal import Decimal

import pytest

from accounting.models import BillImport, BillLine
from accounting.services.bills import BillRejected, bill_import
from broker.models import AuditRecord
from tests.accounting.helpers import FIXTURES
from tests.factories import GpuClassFactory, WorkloadFactory

pytestmark = pytest.mark.django_db


def _import(name: str, provider: str, **kwargs):
    with (FIXTURES / name).open("rb") as f:
        return bill_import(provider=provider, file_name=name, content=f, **kwargs)


@pytest.fixture
def workloads(trio, gpu_class):
    return {uid: WorkloadFactory(project=trio.project, gpu_class=gpu_class, uid=uid)
            for uid in ("wl-00000000000000a1", "wl-00000000000000b2", "wl-00000000000000c3")}


def test_aws_bill_matches_workload_and_project_tags(trio, cloud, workloads, gpu_class):
    result = _import("aws_cur.csv", "aws", tenant=trio.tenant, cluster=cloud, actor=trio.finance)
    bill = result.bill
    assert not result.duplicate and bill.line_count == 5 and bill.currency == "USD"
    assert bill.total_cost == Decimal("165.0318")
    lines = {ln.line_no: ln for ln in BillLine.objects.all()}
    assert lines[2].workload == workloads["wl-00000000000000a1"] and lines[2].project == trio.project
    assert lines[2].gpu_class == gpu_class
    assert lines[6].project == trio.project and lines[6].workload is None  # EBS, project tag only
    # the p5 line is tagged with another tenant's project: a tenant's bill never charges another tenant
    assert lines[4].project is None and lines[5].project is None
    assert bill.matched_count == 3 and result.unmatched == 2
    assert AuditRecord.objects.filter(action="accounting.bill_import", tenant=trio.tenant).count() == 1


def test_organisation_wide_bill_may_match_any_tenant(trio, cloud, workloads):
    _import("aws_cur.csv", "aws", cluster=cloud)
    assert BillLine.objects.get(line_no=4).project == trio.other_project


def test_gcp_and_azure_samples_import(trio, cloud, workloads, settings):
    settings.GPUBROKER_ACCOUNTING_BILL_GPU_CLASSES = {"nc4as t4": "t4"}
    t4 = GpuClassFactory(slug="t4", name="T4", gpu_models=["Tesla T4"])
    gcp = _import("gcp_billing.csv", "gcp", tenant=trio.tenant).bill
    assert (gcp.line_count, gcp.matched_count) == (3, 2)
    assert BillLine.objects.filter(bill=gcp, workload=workloads["wl-00000000000000b2"]).count() == 2
    cols = _import("gcp_billing_label_columns.csv", "gcp", tenant=trio.tenant).bill
    assert (cols.line_count, cols.matched_count) == (2, 1)
    azure = _import("azure_cost_details.csv", "azure", tenant=trio.tenant).bill
    assert (azure.line_count, azure.matched_count, azure.currency) == (3, 2, "EUR")
    nc = BillLine.objects.get(bill=azure, line_no=3)
    assert nc.project == trio.project and nc.gpu_class == t4


def test_importing_the_same_file_twice_changes_nothing(trio, workloads):
    first = _import("aws_cur.csv", "aws", tenant=trio.tenant)
    counts = (BillImport.objects.count(), BillLine.objects.count(), AuditRecord.objects.count())
    again = _import("aws_cur.csv", "aws", tenant=trio.tenant)
    assert again.duplicate and again.bill == first.bill
    assert (BillImport.objects.count(), BillLine.objects.count(), AuditRecord.objects.count()) == counts


def _broken(kind: str) -> bytes:
    data = (FIXTURES / "aws_cur.csv").read_bytes()
    if kind == "missing column":
        return data.replace(b"line_item_usage_amount", b"line_item_usage_amnt", 1)
    if kind == "bad number":
        return data.replace(b"98.3200000000,98.3200000000", b"98.3200000000,98.32 USD")
    if kind == "bad date":
        return data.replace(b",2026-11-05T00:00:00Z,", b",2026-11-05 noon,", 1)
    return data.replace(b"g5.xlarge Instance", b"g5.xlarge Inst\xe4nce")  # wrong encoding


@pytest.mark.parametrize("kind,line,column", [
    ("missing column", 1, None), ("bad number", 4, 15), ("bad date", 5, 6), ("wrong encoding", 5, None)])
def test_malformed_file_is_rejected_with_position_and_nothing_stored(trio, workloads, kind, line, column):
    audits = AuditRecord.objects.count()
    with pytest.raises(BillRejected) as caught:
        bill_import(provider="aws", file_name="cur-2026-11.csv", content=io.BytesIO(_broken(kind)),
                    tenant=trio.tenant, actor=trio.finance)
    first = caught.value.errors[0]
    assert first.file_name == "cur-2026-11.csv" and first.line == line
    if column is not None:
        assert first.column == column
    else:
        assert kind == "missing column" or first.column is not None
    assert str(first).startswith(f"cur-2026-11.csv, line {line}")
    assert not BillImport.objects.exists() and not BillLine.objects.exists()
    assert AuditRecord.objects.count() == audits
