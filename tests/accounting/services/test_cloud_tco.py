"""The cloud-burst rule as a warning: a tenant's cloud spend this month against the on-prem
TCO of the same GPU-hours; the first crossing tells finance and the tenant's admins once."""
from __future__ import annotations

from datetime import date, datetime, timezone
from decimal import Decimal

import pytest
from django.core import mail

from accounting.models import CloudTcoReading
from accounting.services.cloud_tco import cloud_tco_check
from accounting.services.rates import rate_set
from accounting.services.usage import usage_ingest
from broker.models import AuditRecord
from tests.accounting.helpers import usage

pytestmark = pytest.mark.django_db(transaction=True)  # the mail leaves on commit
NOV_20 = datetime(2026, 11, 20, 12, 0, tzinfo=timezone.utc)


def test_a_tenant_past_the_share_is_told_once_with_the_figures(trio, books):
    # physics in November (tests/accounting/conftest.py): 165.03 of cloud spend (bills and the
    # p5/g5 lines) against 2 cloud GPU-hours of a100 at the on-prem 2.00: TCO 4.00, 4126%
    [crossed] = cloud_tco_check(now=NOV_20)
    assert (crossed.tenant, crossed.cloud_spend, crossed.onprem_tco) == (trio.tenant, Decimal("165.03"),
                                                                         Decimal("4.00"))
    assert crossed.crossed_at == NOV_20 and crossed.action == "warn"
    assert sorted(m.to[0] for m in mail.outbox) == ["money@example.org", "owner@example.org"]
    assert "member@example.org" not in [m.to[0] for m in mail.outbox]  # researchers are not told
    body = mail.outbox[0].body
    assert "Cloud spend of" in body and "165.03, 4126% of what the same GPU-hours cost on-prem" in body
    assert "(4.00): past the policy's 65%; bursting goes on (the policy only warns)" in body
    assert cloud_tco_check(now=NOV_20) == [] and len(mail.outbox) == 2  # once a month
    assert AuditRecord.objects.filter(action="accounting.cloud_tco_crossed", tenant_id=trio.tenant.id).count() == 1


def test_a_tenant_with_cloud_spend_but_no_cloud_gpu_hours_has_no_share_and_is_not_told(trio, books):
    cloud_tco_check(now=NOV_20)
    other = CloudTcoReading.objects.get(tenant=trio.other_tenant)  # a GCP bill, no GPU-hours in the ledger
    assert other.onprem_tco == 0 and other.share is None and other.crossed_at is None


def test_under_the_share_a_reading_is_kept_and_nobody_is_told(trio, gpu_class, cloud):
    rate_set(gpu_class=gpu_class, price_per_gpu_hour=Decimal("2.00"), valid_from=date(2026, 1, 1))
    cloud.price_per_gpu_hour = Decimal("1.00")  # no bill yet: estimated at 1.00 per GPU-hour
    cloud.save()
    usage_ingest(cluster=cloud, records=[usage("lattice/c1", cluster="aws-eu", source="kueue", gpus=2, seconds=3600)])
    assert cloud_tco_check(now=NOV_20) == []
    reading = CloudTcoReading.objects.get(tenant=trio.tenant)
    assert (reading.cloud_spend, reading.onprem_tco, reading.share) == (Decimal("2.00"), Decimal("4.00"), 0.5)
    assert reading.crossed_at is None and not mail.outbox


def test_the_policy_key_is_checked_and_named():
    from broker.placement.policy import PolicyError
    from broker.placement.policy_loader import load_policy

    with pytest.raises(PolicyError) as caught:
        load_policy("burst:\n  over_tco: shout\n")
    assert caught.value.key == "burst.over_tco" and "one of warn, stop" in str(caught.value)
    assert load_policy("burst:\n  over_tco: stop\n").burst.over_tco == "stop"
