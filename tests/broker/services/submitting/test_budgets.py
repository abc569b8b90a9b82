"""GPU-hour budgets at submission: a hard budget refuses the job that would pass it with the
budget, the use and the holdings (the form, the API, the preview); a soft one lets it in and
warns; the budgets and their burn-down are in the preview, the API and the accounting pages."""
from __future__ import annotations

from contextlib import contextmanager
from decimal import Decimal

import pytest
from django.urls import reverse

from accounting.services.usage import usage_ingest
from broker import runtime
from broker.models import AuditRecord, Workload
from broker.services.fleet.policy import current_policy, policy_override
from broker.services.submitting.preview import workload_preview
from broker.spec import SpecError
from tests.accounting.helpers import usage
from tests.factories import ClusterFactory

SPEC = {"name": "big", "command": "run", "gpu_class": "a100-80gb", "gpus_per_worker": 8, "time_limit_minutes": 600}


@contextmanager
def budget(hours: int, kind: str = "hard"):
    """The policy in force with one budget of physics' a100-80gb GPU-hours this month."""
    text = current_policy().text
    start = text.index("\nbudgets:\n")
    end = text.index("\n\n", start + 1)
    line = f"\nbudgets:\n  - {{tenant: physics, gpu_class: a100-80gb, gpu_hours: {hours}, kind: {kind}}}"
    with policy_override(text[:start] + line + text[end:]):
        yield


@pytest.fixture
def used_ten(trio):
    """10 GPU-hours of physics' a100-80gb in the ledger this month (a Slurm job that ended)."""
    hpc = ClusterFactory(name="hpc", kind="slurm", location="onprem")
    start = runtime.now().replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    usage_ingest(cluster=hpc, records=[usage("1", gpus=2, seconds=5 * 3600, start=start, gpu_model="A100 80GB")])


def test_a_hard_budget_refuses_the_job_that_would_pass_it_with_the_budget_the_use_and_the_holdings(
        trio, quota, submit, used_ten):
    with budget(100):
        submit(gpus_per_worker=2, time_limit_minutes=600)  # holds 20 GPU-h: 30 of 100
        with pytest.raises(SpecError) as caught:
            submit(gpus_per_worker=8, workers=2, time_limit_minutes=360)  # asks 96
    [words] = caught.value.errors["budget"]
    assert words.startswith("refused by the hard budget physics a100-80gb per month (")
    assert ("100.00 GPU-hours; used 10.00, held by queued and running work 20.00, this job asks 96.00: "
            "26.00 over (2 worker(s) x 8 GPU(s) x 360 min)") in words
    assert Workload.objects.count() == 1


def test_the_hold_returns_when_the_work_ends_so_the_next_job_fits(trio, quota, submit, used_ten):
    with budget(100):
        first = submit(gpus_per_worker=8, time_limit_minutes=600)  # holds 80: 90 of 100
        with pytest.raises(SpecError):
            submit(gpus_per_worker=8, time_limit_minutes=120)  # asks 16
        Workload.objects.filter(id=first.id).update(state="cancelled", ended_at=runtime.now())
        assert submit(gpus_per_worker=8, time_limit_minutes=120).state == "submitted"


def test_a_soft_budget_lets_the_job_in_and_records_the_warning(trio, quota, submit, used_ten):
    with budget(100, kind="soft"):
        workload = submit(gpus_per_worker=8, workers=2, time_limit_minutes=360)
    [warned] = AuditRecord.objects.filter(action="budget.warned", workload=workload)
    assert warned.message.startswith("soft budget physics a100-80gb per month") and "106.00" not in warned.message
    assert "6.00 over" in warned.message


def test_under_its_warning_share_a_budget_says_nothing(trio, quota, submit, used_ten):
    with budget(1000):
        workload = submit(gpus_per_worker=2)
    assert not AuditRecord.objects.filter(action="budget.warned", workload=workload).exists()


def test_the_preview_refuses_as_the_submission_does_and_shows_the_budget_it_counts_against(
        trio, quota, make_cluster, used_ten):
    make_cluster("onprem")
    with budget(100):
        with pytest.raises(SpecError) as caught:
            workload_preview(user=trio.member, project_id=trio.project.id,
                             spec_data={**SPEC, "time_limit_minutes": 720})  # asks 96 of 90 left
        preview = workload_preview(user=trio.member, project_id=trio.project.id,
                                   spec_data={**SPEC, "time_limit_minutes": 480})  # 64: 74 of 100
    assert "this job asks 96.00: 6.00 over" in caught.value.errors["budget"][0]
    [standing] = preview.budgets
    assert (standing.used_hours, standing.asked_hours, standing.remaining_hours) == (
        Decimal("10.00"), Decimal("64.00"), Decimal("90.00"))
    assert not preview.warnings  # 74%: under the 80% warning share


def test_the_api_answers_400_naming_budget_and_lists_the_budgets_of_the_callers_tenants(
        trio, quota, api, used_ten, make_cluster):
    make_cluster("onprem")
    with budget(100):
        refused = api(trio.member).post(reverse("api-workloads"), {"project": trio.project.id, **SPEC,
                                                                    "workers": 2})
        listed = api(trio.member).get(reverse("api-budgets")).json()
        previewed = api(trio.member).post(reverse("api-workload-preview"),
                                          {"project": trio.project.id, **SPEC, "time_limit_minutes": 60}).json()
        outsider = api(trio.outsider).get(reverse("api-budgets")).json()
    assert refused.status_code == 400 and "160.00" in refused.json()["error"]["fields"]["budget"][0]
    [mine] = listed
    assert (mine["name"], mine["kind"], mine["gpu_hours"], mine["used_hours"], mine["held_hours"]) == (
        "physics a100-80gb per month", "hard", "100.00", "10.00", "0.00")
    assert mine["forecast_hours"] and mine["words"].startswith("hard budget physics")
    assert previewed["budgets"][0]["asked_hours"] == "8.00"
    assert outsider == []  # biology has no budget; physics' is not the outsider's to see


def test_the_accounting_pages_show_the_burn_down_to_members_and_not_to_the_outsider(
        trio, quota, login, used_ten, client):
    with budget(100):
        finance = login(trio.finance).get(reverse("chargeback")).content.decode()
        client.logout()
        member = login(trio.member).get(reverse("usage-mine")).content.decode()
        client.logout()
        outsider = login(trio.outsider).get(reverse("usage-mine")).content.decode()
    for page in (finance, member):
        assert 'id="budgets"' in page and 'data-budget="physics a100-80gb per month"' in page
        assert 'data-used="10.00"' in page and 'class="burn-now"' in page
    assert 'id="budgets"' not in outsider
