"""GPU-hour budgets against the ledger: used is the chargeback's to the cent over a month of
mixed backends, live work holds its GPUs x time limit until it ends, and each threshold is
told once a period to the tenant's admins, finance and the class's quota owner."""
from __future__ import annotations

import random
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from decimal import ROUND_HALF_UP, Decimal

import pytest
from django.core import mail

from accounting.chargeback import build_report
from accounting.models import BudgetAlert
from accounting.services.budgets import budget_check, budget_standing, budget_standings
from accounting.services.usage import usage_ingest
from broker.models import AuditRecord, Quota
from broker.services.fleet.policy import current_policy, policy_override
from tests.accounting.helpers import usage
from tests.factories import ClusterFactory, WorkloadFactory

CENT = Decimal("0.01")
NOV_30 = datetime(2026, 11, 30, 23, 0, tzinfo=timezone.utc)
NOV_15 = datetime(2026, 11, 16, 0, 0, tzinfo=timezone.utc)


@contextmanager
def budgets(*lines: str):
    """The policy in force with these budgets (YAML flow mappings) instead of its own."""
    text = current_policy().text
    start = text.index("\nbudgets:\n")
    end = text.index("\n\n", start + 1)
    listed = "".join(f"\n  - {line}" for line in lines)
    with policy_override(text[:start] + "\nbudgets:" + listed + text[end:]) as loaded:
        yield loaded


def only(loaded):
    [budget] = loaded.policy.budgets
    return budget


def test_used_is_the_chargebacks_to_the_cent_over_a_month_of_slurm_kueue_volcano_and_a_billed_cloud(
        trio, books, gpu_class):
    # books (tests/accounting/conftest.py): physics/lattice a100 in November, on-prem Slurm
    # 14 GPU-h at 2.00 and a billed cloud Kueue job of 2 GPU-h (65.55). Add a month of jobs
    # on an on-prem Kueue and an on-prem Volcano cluster, ending every day of the month, one
    # running (not charged yet) and one ending in December (charged then)
    kueue = ClusterFactory(name="k8s-onprem", kind="kueue", location="onprem")
    volcano = ClusterFactory(name="vc-onprem", kind="volcano", location="onprem")
    rng = random.Random(7)
    seconds = {"kueue": 0, "volcano": 0}
    for day in range(1, 31):
        for cluster, source in ((kueue, "kueue"), (volcano, "volcano")):
            gpus, secs = rng.choice((1, 2, 4, 8)), rng.randint(60, 20000)
            start = datetime(2026, 11, day, tzinfo=timezone.utc)
            end = start + timedelta(seconds=secs)
            if end.month == 11:
                seconds[source] += gpus * secs
            usage_ingest(cluster=cluster, records=[usage(f"lattice/{source}-{day}", cluster=cluster.name,
                                                         source=source, gpus=gpus, seconds=secs, start=start)])
    usage_ingest(cluster=kueue, records=[usage("lattice/running", cluster=kueue.name, source="kueue", gpus=8,
                                               seconds=None, start=NOV_15)])
    with budgets("{tenant: physics, gpu_class: a100-80gb, gpu_hours: 5000}") as loaded:
        standing = budget_standing(only(loaded), at=NOV_30)
    report = build_report(months=[NOV_30.date().replace(day=1)], tenant_ids={trio.tenant.id})
    rows = [r for r in report.rows if r.gpu_class == gpu_class.slug]
    assert standing.used_hours == sum(r.gpu_hours for r in rows)
    assert standing.used_cost == sum(r.cost for r in rows)
    # and by hand: every GPU-second of the month on-prem at 2.00, the cloud job at its bill
    onprem_secs = (2 * 3600 + 8 * 5400) + seconds["kueue"] + seconds["volcano"]
    cloud_secs = 4 * 1800
    by_hand_hours = (Decimal(onprem_secs + cloud_secs) / 3600).quantize(CENT, ROUND_HALF_UP)
    by_hand_cost = (Decimal("2.00") * onprem_secs / 3600).quantize(CENT, ROUND_HALF_UP) + Decimal("65.55")
    assert (standing.used_hours, standing.used_cost) == (by_hand_hours, by_hand_cost)
    assert standing.held_hours == 0 and standing.remaining_hours == Decimal("5000.00") - by_hand_hours


def test_live_work_holds_its_gpus_for_its_time_limit_and_the_hold_returns_when_it_ends(trio, books, gpu_class):
    running = WorkloadFactory(project=trio.project, gpu_class=gpu_class, total_gpus=4, state="running",
                              spec={"time_limit_minutes": 90, "gpus_per_worker": 4, "workers": 1})
    WorkloadFactory(project=trio.project, gpu_class=gpu_class, total_gpus=2, state="queued",
                    spec={"time_limit_minutes": 30, "gpus_per_worker": 2, "workers": 1})
    WorkloadFactory(project=trio.other_project, gpu_class=gpu_class, total_gpus=8, state="running")  # biology
    with budgets("{tenant: physics, gpu_class: a100-80gb, gpu_hours: 100}") as loaded:
        before = budget_standing(only(loaded), at=NOV_30)
        assert before.held_hours == Decimal("7.00")  # 4 x 1.5 h + 2 x 0.5 h
        running.state = "completed"
        running.save()
        # it ran 30 minutes on Slurm: the ledger has it, the 6 GPU-h it held are back
        usage_ingest(cluster=books.bill.cluster, records=[usage("lattice/ran", cluster="aws-eu", source="kueue",
                                                                 gpus=4, seconds=1800, workload_id=running.uid)])
        after = budget_standing(only(loaded), at=NOV_30)
    assert after.held_hours == Decimal("1.00")
    assert after.used_hours == before.used_hours + Decimal("2.00")
    assert after.remaining_hours == before.remaining_hours + Decimal("6.00") - Decimal("2.00")


def test_a_project_budget_counts_its_project_only_and_a_quarter_counts_three_months(trio, books):
    with budgets("{tenant: physics, project: lattice, gpu_class: a100-80gb, period: quarter, gpu_hours: 100}",
                 "{tenant: physics, project: nowhere, gpu_class: a100-80gb, gpu_hours: 100}") as loaded:
        quarter, missing = (budget_standing(b, at=NOV_30) for b in loaded.policy.budgets)
    # October (1 GPU-h) and November (14 + 2) of lattice; Q4 runs October to December
    assert (quarter.start.isoformat(), quarter.end.isoformat()) == ("2026-10-01", "2027-01-01")
    assert quarter.used_hours == Decimal("17.00")
    assert missing.used_hours == 0 and missing.held_hours == 0


@pytest.mark.django_db(transaction=True)  # the mail leaves on commit
def test_each_threshold_is_told_once_a_period_to_admins_finance_and_the_quota_owner(trio, books, gpu_class):
    Quota.objects.create(tenant=trio.tenant, gpu_class=gpu_class, limit_gpus=8, owner=trio.owner)
    with budgets("{tenant: physics, gpu_class: a100-80gb, gpu_hours: 20, warn_share: 0.5}"):
        [warned] = budget_check(now=NOV_30)  # 16 of 20 GPU-h: past 50%, not past the budget
        assert warned.level == "warn" and "used 16.00" in warned.message
        assert sorted(m.to[0] for m in mail.outbox) == ["money@example.org", "owner@example.org"]
        assert "member@example.org" not in [m.to[0] for m in mail.outbox]
        assert budget_check(now=NOV_30) == []  # once a period
        WorkloadFactory(project=trio.project, gpu_class=gpu_class, total_gpus=8, state="running")  # 8 GPU-h held
        [over] = budget_check(now=NOV_30)
        assert over.level == "over" and "4.00 over" in over.message
        assert "At this period's pace so far it ends at" in mail.outbox[-1].body
    assert BudgetAlert.objects.count() == 2
    assert AuditRecord.objects.filter(action="budget.over", tenant_id=trio.tenant.id).count() == 1


@pytest.mark.django_db
def test_a_budget_of_a_tenant_not_in_the_portal_is_never_told_and_stands_at_nothing(trio):
    with budgets("{tenant: nobody, gpu_class: a100-80gb, gpu_hours: 10}") as loaded:
        assert budget_check(now=NOV_30) == []
        assert budget_standing(only(loaded), at=NOV_30).used_hours == 0


def test_members_see_their_tenants_budgets_and_an_outsider_none_of_them(trio, books):
    with budgets("{tenant: physics, gpu_class: a100-80gb, gpu_hours: 100}",
                 "{tenant: biology, gpu_class: a100-80gb, gpu_hours: 50}"):
        assert [s.budget.tenant for s in budget_standings(user=trio.member, at=NOV_30)] == ["physics"]
        assert [s.budget.tenant for s in budget_standings(user=trio.outsider, at=NOV_30)] == ["biology"]
        assert budget_standings(user=trio.finance, tenant_slug="biology", at=NOV_30) == []
