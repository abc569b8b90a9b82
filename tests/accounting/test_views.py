"""Every accounting page: finance 200, outsider 404 or an empty scoped page, wrong role 403."""
from __future__ import annotations

from datetime import date

import pytest
from django.urls import reverse

from accounting.models import BillImport, Discrepancy, GpuRate, ReconciliationRun
from accounting.services.reconciliation import reconciliation_run
from tests.accounting.helpers import FIXTURES

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.accounting.urls")]
NOV = "?first=2026-11&months=1"


@pytest.fixture
def planted(books, onprem, cloud):
    for cluster in (onprem, cloud):
        reconciliation_run(cluster_id=cluster.id, period=date(2026, 11, 1))


FINANCE_PAGES = ["chargeback", "chargeback-export", "bill-list", "reconciliation", "rate-list"]


@pytest.mark.parametrize("name", FINANCE_PAGES)
def test_finance_pages_answer_finance_and_refuse_other_roles(trio, books, login, name):
    assert login(trio.finance).get(reverse(name)).status_code == 200
    for wrong_role in (trio.member, trio.owner):
        assert login(wrong_role).get(reverse(name)).status_code == 403


@pytest.mark.parametrize("name", FINANCE_PAGES + ["usage-mine"])
def test_anonymous_is_sent_to_log_in(client, name):
    response = client.get(reverse(name))
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_usage_mine_shows_my_projects_only(trio, books, login):
    page = login(trio.member).get(reverse("usage-mine") + "?period=2026-11")
    assert page.status_code == 200 and "16.00" in page.content.decode()
    assert [u.project for u in page.context["lines"]] == [trio.project] * 2
    theirs = login(trio.outsider).get(reverse("usage-mine") + "?period=2026-11")
    assert theirs.status_code == 200 and all(u.project == trio.other_project for u in theirs.context["lines"])


def test_chargeback_page_scoped_and_with_its_charts_data(trio, books, login):
    page = login(trio.finance).get(reverse("chargeback") + NOV).content.decode()
    assert 'id="chargeback-chart-data"' in page and 'id="chart-spend"' in page and 'id="chart-hours"' in page
    assert 'data-total="cost">194.23<' in page and "lattice" in page
    theirs = login(trio.outsider)
    body = theirs.get(reverse("chargeback") + NOV).content.decode()
    assert "lattice" not in body and "genomes" in body
    assert theirs.get(reverse("chargeback") + NOV + "&tenant=physics").status_code == 404
    assert theirs.get(reverse("chargeback-export") + NOV + "&tenant=physics&format=csv").status_code == 404


def test_bill_detail(trio, books, login, operator):
    url = reverse("bill-detail", args=[books.bill.id])
    page = login(trio.finance).get(url)
    assert page.status_code == 200 and "i-0a1b2c3d4e5f60001" in page.content.decode()
    assert "unmatched" in page.content.decode()
    assert login(trio.outsider).get(url).status_code == 404
    assert login(trio.member).get(url).status_code == 403
    assert login(operator).get(url).status_code == 200


def test_bill_list_is_scoped(trio, books, login):
    assert list(login(trio.finance).get(reverse("bill-list")).context["bills"]) == [books.bill]
    assert list(login(trio.outsider).get(reverse("bill-list")).context["bills"]) == [books.other_bill]


def _upload(client, data: bytes, trio, name="cur.csv"):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return client.post(reverse("bill-list"), {
        "provider": "aws", "tenant": trio.tenant.id, "file": SimpleUploadedFile(name, data, "text/csv")})


def test_upload_imports_then_recognises_the_same_file(trio, login, gpu_class):
    client = login(trio.finance)
    data = (FIXTURES / "aws_cur.csv").read_bytes()
    first = _upload(client, data, trio)
    bill = BillImport.objects.get()
    assert first.status_code == 302 and first["Location"] == reverse("bill-detail", args=[bill.id])
    again = client.get(first["Location"])
    assert "Imported 5 lines; 2 match no project." in again.content.decode()
    second = _upload(client, data, trio, name="renamed.csv")
    assert BillImport.objects.count() == 1
    assert "already imported" in client.get(second["Location"]).content.decode()


def test_upload_shows_the_first_problem_and_stores_nothing(trio, login):
    data = (FIXTURES / "aws_cur.csv").read_bytes().replace(b"98.3200000000,98.3200000000", b"98.32,abc")
    page = _upload(login(trio.finance), data, trio)
    body = page.content.decode()
    assert page.status_code == 400 and not BillImport.objects.exists()
    assert "First problem: cur.csv, line 4, column 15 (line_item_unblended_cost): bad number &#x27;abc&#x27;" in body


def test_upload_for_another_tenant_is_refused(trio, login):
    client = login(trio.finance)
    response = client.post(reverse("bill-list"), {"provider": "aws", "tenant": trio.other_tenant.id,
                                                  "file": (FIXTURES / "aws_cur.csv").open("rb")})
    assert response.status_code == 200 and "tenant" in response.context["form"].errors
    assert not BillImport.objects.exists()


def test_reconciliation_page_scoped(trio, planted, login, operator):
    url = reverse("reconciliation") + "?period=2026-11"
    mine = login(trio.finance).get(url)
    kinds = {d.kind for v in mine.context["runs"] for d in v.discrepancies}
    tenants = {d.tenant_id for v in mine.context["runs"] for d in v.discrepancies}
    assert mine.status_code == 200 and tenants == {trio.tenant.id} and "bill_without_job" in kinds
    body = mine.content.decode()
    billed = Discrepancy.objects.filter(bill_line__isnull=False).first().bill_line
    assert reverse("bill-detail", args=[billed.bill_id]) in body
    theirs = login(trio.outsider).get(url)
    assert all(d.tenant_id == trio.other_tenant.id for v in theirs.context["runs"] for d in v.discrepancies)
    everything = login(operator).get(url)
    assert sum(len(v.discrepancies) for v in everything.context["runs"]) == Discrepancy.objects.count()


def test_reconciliation_can_be_run_from_the_page(trio, books, login, onprem):
    client = login(trio.finance)
    response = client.post(reverse("reconciliation"), {"period": "2026-11", "cluster": "hpc"})
    assert response.status_code == 302 and ReconciliationRun.objects.filter(cluster=onprem).count() == 1
    assert login(trio.member).post(reverse("reconciliation"), {"period": "2026-11"}).status_code == 403


def test_rates_are_set_by_operators_only(trio, login, operator, gpu_class, onprem):
    tco = {"kind": "tco", "tco-gpu_class": gpu_class.id, "tco-valid_from": "2026-01-01", "tco-hardware_cost": "300000",
           "tco-life_years": "5", "tco-power_kw": "6.5", "tco-price_per_kwh": "0.25", "tco-support_per_year": "20000",
           "tco-staff_per_year": "30000", "tco-gpus": "8", "tco-utilisation": "0.7"}
    assert login(trio.finance).post(reverse("rate-list"), tco).status_code == 403
    assert login(operator).post(reverse("rate-list"), tco).status_code == 302
    assert str(GpuRate.objects.get().price_per_gpu_hour) == "2.5325"
    direct = {"kind": "direct", "direct-gpu_class": gpu_class.id, "direct-cluster": onprem.id,
              "direct-valid_from": "2026-06-01", "direct-price_per_gpu_hour": "1.75"}
    assert login(operator).post(reverse("rate-list"), direct).status_code == 302
    page = login(trio.finance).get(reverse("rate-list")).content.decode()
    assert "2.5325" in page and "1.7500" in page and "Compute and save" not in page


def test_same_file_from_another_tenant_reveals_nothing(trio, login):
    data = (FIXTURES / "aws_cur.csv").read_bytes()
    _upload(login(trio.finance), data, trio, name="physics-secret-name.csv")
    client = login(trio.outsider)
    from django.core.files.uploadedfile import SimpleUploadedFile

    response = client.post(reverse("bill-list"), {
        "provider": "aws", "tenant": trio.other_tenant.id, "file": SimpleUploadedFile("x.csv", data, "text/csv")})
    assert response.status_code == 302 and response["Location"] == reverse("bill-list")
    page = client.get(response["Location"]).content.decode()
    assert "already imported" in page and "physics-secret-name" not in page
    assert BillImport.objects.count() == 1


def test_chargeback_page_warns_of_a_tenant_past_the_cloud_tco_share_to_its_finance_only(trio, books, login,
                                                                                       operator):
    from datetime import datetime, timezone

    from accounting.services.cloud_tco import cloud_tco_check

    cloud_tco_check(now=datetime(2026, 11, 20, tzinfo=timezone.utc))
    page = login(trio.finance).get(reverse("chargeback") + NOV).content.decode()
    assert 'id="cloud-tco-warnings"' in page and 'data-tenant="physics" data-month="2026-11"' in page
    assert "4126% of what the same GPU-hours cost on-prem at TCO rates (4.00): past the policy&#x27;s 65%" in page
    assert "finance and the tenant's admins were told" in page
    assert 'id="cloud-tco-warnings"' in login(operator).get(reverse("chargeback") + NOV).content.decode()
    assert 'id="cloud-tco-warnings"' not in login(trio.outsider).get(reverse("chargeback") + NOV).content.decode()
    assert login(trio.member).get(reverse("chargeback") + NOV).status_code == 403
    october = login(trio.finance).get(reverse("chargeback") + "?first=2026-10&months=1").content.decode()
    assert 'id="cloud-tco-warnings"' not in october
