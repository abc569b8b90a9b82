"""Reconciliation finds each planted discrepancy, nothing else, and the same again on a rerun."""
from __future__ import annotations

import io
from decimal import Decimal
from datetime import date, timedelta

import pytest

from accounting.models import Discrepancy, DiscrepancyKind as K, ReconciliationRun
from accounting.services.bills import bill_import
from accounting.services.reconciliation import reconciliation_run, reconciliation_run_all
from accounting.services.usage import usage_ingest
from broker.models import AuditRecord
from tests.accounting.helpers import T0, usage
from tests.factories import WorkloadFactory

pytestmark = pytest.mark.django_db
NOV = date(2026, 11, 1)


def _ran(trio, gpu_class, cluster, uid, *, gpus=2, seconds=3600, start=T0, state="completed", **kwargs):
    return WorkloadFactory(project=trio.project, gpu_class=gpu_class, cluster=cluster, uid=uid, total_gpus=gpus,
                           state=state, started_at=start,
                           ended_at=None if seconds is None else start + timedelta(seconds=seconds), **kwargs)


@pytest.fixture
def planted(trio, gpu_class, onprem):
    ok = _ran(trio, gpu_class, onprem, "wl-000000000000000a")
    missing = _ran(trio, gpu_class, onprem, "wl-000000000000000b")
    differ = _ran(trio, gpu_class, onprem, "wl-000000000000000c", gpus=4)
    _ran(trio, gpu_class, onprem, "wl-000000000000000d", seconds=None, state="running")  # not ended: not compared
    _ran(trio, gpu_class, onprem, "wl-000000000000000e", start=T0 + timedelta(days=40))  # December
    usage_ingest(cluster=onprem, records=[
        usage("100", workload_id=ok.uid, gpu_seconds=7250),         # within 2 %
        usage("101", workload_id=differ.uid, gpus=4, seconds=4000),  # 16000 vs 14400 GPU-s
        usage("200"),                                                # no workload id: ran without the broker
        usage("201", workload_id="wl-ffffffffffffffff"),             # names a workload nobody knows
        usage("202", account="mystery"),                             # account matches no project
        usage("300", start=T0 - timedelta(days=30)),                 # October: another period
        usage("301", seconds=None),                                  # still running: not yet charged
    ])
    return {"missing": missing, "differ": differ}


def _found(run) -> set[tuple[str, str]]:
    return {(d.kind, d.workload.uid if d.workload else d.job_id) for d in run.discrepancies.select_related("workload")}


def test_each_planted_discrepancy_is_found_and_nothing_else(planted, onprem):
    run = reconciliation_run(cluster_id=onprem.id, period=NOV)
    assert _found(run) == {
        (K.MISSING_IN_SCHEDULER, "wl-000000000000000b"),
        (K.HOURS_DIFFER, "wl-000000000000000c"),
        (K.JOB_WITHOUT_BROKER, "200"),
        (K.MISSING_IN_BROKER, "201"),
        (K.UNMATCHED_ACCOUNT, "202"),
    }
    differ = run.discrepancies.get(kind=K.HOURS_DIFFER)
    assert (differ.broker_gpu_seconds, differ.scheduler_gpu_seconds) == (14400, 16000)
    assert run.discrepancies.get(kind=K.UNMATCHED_ACCOUNT).tenant is None
    assert run.discrepancies.get(kind=K.MISSING_IN_SCHEDULER).tenant == planted["missing"].tenant
    assert (run.workloads, run.jobs, run.broker_gpu_seconds) == (3, 5, 7200 + 7200 + 14400)


def test_running_it_again_gives_the_same_answer(planted, onprem):
    first = _found(reconciliation_run(cluster_id=onprem.id, period=NOV))
    again = reconciliation_run(cluster_id=onprem.id, period=NOV)
    assert _found(again) == first
    assert ReconciliationRun.objects.count() == 1 and Discrepancy.objects.count() == len(first)


def test_tolerance_comes_from_settings(planted, onprem, settings):
    settings.GPUBROKER_ACCOUNTING_TOLERANCE = 0.2
    run = reconciliation_run(cluster_id=onprem.id, period=NOV)
    assert not run.discrepancies.filter(kind=K.HOURS_DIFFER).exists() and run.tolerance == 0.2
    settings.GPUBROKER_ACCOUNTING_TOLERANCE = 0.001
    run = reconciliation_run(cluster_id=onprem.id, period=NOV)
    assert {d.workload.uid for d in run.discrepancies.filter(kind=K.HOURS_DIFFER)} == {
        "wl-000000000000000a", "wl-000000000000000c"}


def test_job_ending_across_the_month_boundary_is_one_job(trio, gpu_class, onprem):
    start = date(2026, 11, 30)
    # the broker saw it end at 23:59:50 on 30 November, the scheduler at 00:00:10 on 1 December
    wl = _ran(trio, gpu_class, onprem, "wl-0000000000000010", start=T0.replace(day=30, hour=23), seconds=3590)
    usage_ingest(cluster=onprem, records=[usage("400", workload_id=wl.uid, start=wl.started_at, seconds=3610)])
    assert _found(reconciliation_run(cluster_id=onprem.id, period=start)) == set()
    assert _found(reconciliation_run(cluster_id=onprem.id, period=date(2026, 12, 1))) == set()


CUR_HEADER = ("line_item_usage_start_date,line_item_resource_id,line_item_usage_amount,line_item_unblended_cost,"
              "product_instance_type,resource_tags_user_project,resource_tags_user_gpubroker_workload\n")


def test_cloud_bill_against_the_ledger(trio, gpu_class, cloud, onprem):
    billed = _ran(trio, gpu_class, cloud, "wl-00000000000000a1")
    unbilled = _ran(trio, gpu_class, cloud, "wl-00000000000000a2")
    usage_ingest(cluster=cloud, records=[
        usage("lattice/a1", cluster="aws-eu", source="kueue", workload_id=billed.uid),
        usage("lattice/a2", cluster="aws-eu", source="kueue", workload_id=unbilled.uid)])
    rows = CUR_HEADER + (
        "2026-11-03T09:00:00Z,i-1,1,32.77,p4d.24xlarge,lattice,wl-00000000000000a1\n"
        "2026-11-03T09:00:00Z,i-2,1,32.77,p4d.24xlarge,lattice,wl-0000000000000bad\n"  # no such job
        "2026-11-03T09:00:00Z,i-3,1,1.12,g5.xlarge,,\n")                                 # untagged
    bill_import(provider="aws", file_name="cur.csv", content=io.BytesIO(rows.encode()), tenant=trio.tenant,
                cluster=cloud)
    run = reconciliation_run(cluster_id=cloud.id, period=NOV)
    kinds = sorted((d.kind, d.bill_line.line_no if d.bill_line else d.job_id) for d in run.discrepancies.all())
    assert kinds == [(K.BILL_WITHOUT_JOB, 3), (K.BILL_WITHOUT_JOB, 4), (K.MISSING_IN_BILL, "lattice/a2")]
    assert run.bill_lines == 3 and run.bill_cost == Decimal("66.66")
    # the on-prem cluster has no bill: nothing can be missing from it
    assert not reconciliation_run(cluster_id=onprem.id, period=NOV).discrepancies.exists()


def test_run_all_covers_every_enabled_cluster_and_is_audited(onprem, cloud):
    runs = reconciliation_run_all(period=NOV)
    assert {r.cluster.name for r in runs} == {"hpc", "aws-eu"}
    assert AuditRecord.objects.filter(action="accounting.reconcile").count() == 2
