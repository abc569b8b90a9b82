"""Usage and chargeback show the person as well as the project: the workload's submitter,
else the person whose cluster identity the job ran as, else the cluster user as recorded."""
from __future__ import annotations

import csv
import io
from dataclasses import replace
from datetime import date
from decimal import Decimal

from accounting.chargeback import UNASSIGNED, build_report
from accounting.exports import chargeback_csv
from accounting.models import UsageEntry
from accounting.services.rates import rate_set
from accounting.services.usage import usage_ingest
from accounting.periods import month_start
from portal.identity.services.cluster_identity import cluster_identity_set
from tests.accounting.helpers import T0, usage
from tests.factories import UserFactory, WorkloadFactory


def _ingest(trio, onprem, gpu_class):
    rate_set(gpu_class=gpu_class, price_per_gpu_hour=Decimal("2.00"), valid_from=date(2026, 1, 1))
    alice, bob = UserFactory(username="alice"), UserFactory(username="bob")
    cluster_identity_set(actor=trio.owner, user=alice, posix_user="gpb-alice")
    cluster_identity_set(actor=trio.owner, user=bob, posix_user="gpb-bob")
    bobs = WorkloadFactory(project=trio.project, gpu_class=gpu_class, cluster=onprem, submitted_by=bob,
                           uid="wl-00000000000000b1", state="completed")
    usage_ingest(cluster=onprem, records=[
        replace(usage("1", gpus=2, seconds=3600), user="gpb-alice"),       # outside the broker, as alice
        replace(usage("2", gpus=1, seconds=3600, workload_id=bobs.uid), user="root"),  # bob's, project account
        replace(usage("3", gpus=1, seconds=3600), user="stranger"),        # nobody's identity
    ])
    return alice, bob


def test_ingest_records_the_cluster_user_and_charges_the_person(trio, onprem, gpu_class):
    alice, bob = _ingest(trio, onprem, gpu_class)
    rows = {e.job_id: (e.cluster_user, e.user_id, e.project_id) for e in UsageEntry.objects.all()}
    assert rows == {"1": ("gpb-alice", alice.id, trio.project.id), "2": ("root", bob.id, trio.project.id),
                    "3": ("stranger", None, trio.project.id)}


def test_chargeback_has_a_row_per_person_in_the_project_and_the_csv_a_user_column(trio, onprem, gpu_class):
    _ingest(trio, onprem, gpu_class)
    report = build_report(months=[month_start(T0)], tenant_ids={trio.tenant.id})
    by_user = {(r.project, r.user): (r.onprem_hours, r.onprem_cost) for r in report.rows}
    assert by_user == {("lattice", "alice"): (Decimal("2.00"), Decimal("4.00")),
                       ("lattice", "bob"): (Decimal("1.00"), Decimal("2.00")),
                       ("lattice", "stranger"): (Decimal("1.00"), Decimal("2.00"))}
    table = list(csv.reader(io.StringIO(chargeback_csv(report).decode("utf-8-sig"))))
    assert table[0][:5] == ["Month", "Tenant", "Project", "User", "GPU class"]
    assert sorted(row[3] for row in table[1:-1]) == ["alice", "bob", "stranger"]
    assert table[-1][0] == "Total" and table[-1][5] == "4.00"


def test_a_job_with_neither_person_nor_cluster_user_is_unassigned(trio, onprem, gpu_class):
    usage_ingest(cluster=onprem, records=[usage("9", gpus=1, seconds=3600)])
    report = build_report(months=[month_start(T0)], tenant_ids={trio.tenant.id})
    assert [r.user for r in report.rows] == [UNASSIGNED]


def test_chargeback_api_names_the_person_and_the_outsider_sees_none_of_them(trio, onprem, gpu_class, login):
    _ingest(trio, onprem, gpu_class)
    rows = login(trio.finance).get("/api/v1/chargeback/", {"month": f"{T0:%Y-%m}"}).json()["rows"]
    assert sorted((r["project"], r["user"]) for r in rows) == [
        ("lattice", "alice"), ("lattice", "bob"), ("lattice", "stranger")]
    page = login(trio.finance).get("/accounting/chargeback/", {"month": f"{T0:%Y-%m}"})
    assert page.status_code == 200 and b"<th>User</th>" in page.content and b"<td>alice</td>" in page.content
    outsider = login(trio.outsider).get("/api/v1/chargeback/", {"month": f"{T0:%Y-%m}"})
    assert outsider.status_code == 200 and not [r for r in outsider.json()["rows"] if r["project"] == "lattice"]
