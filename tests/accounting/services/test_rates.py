"""GPU-hour rates: from a TCO entry (hand-computed) or set directly; never for cloud."""
from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from django.db import IntegrityError, transaction

from accounting.models import GpuRate, RateSource
from accounting.services.rates import TcoInputs, rate_set, rate_set_from_tco, tco_price

TCO = TcoInputs(hardware_cost=Decimal("300000"), life_years=Decimal("5"), power_kw=Decimal("6.5"),
                price_per_kwh=Decimal("0.25"), support_per_year=Decimal("20000"),
                staff_per_year=Decimal("30000"), gpus=8, utilisation=Decimal("0.7"))


def test_tco_price_by_hand():
    # 300000/5 + 6.5 kW x 8760 h x 0.25 + 20000 + 30000 = 124235 a year,
    # over 8 GPUs x 8760 h x 0.7 = 49056 sold GPU-hours: 2.5325 per GPU-hour
    assert tco_price(TCO) == Decimal("2.5325")


@pytest.mark.parametrize("change", [{"gpus": 0}, {"utilisation": Decimal("1.5")}, {"life_years": Decimal("0")},
                                    {"staff_per_year": Decimal("-1")}])
def test_tco_rejects_nonsense(change):
    with pytest.raises(ValueError):
        tco_price(TcoInputs(**{**TCO.__dict__, **change}))


@pytest.mark.django_db
def test_rates_set_directly_or_from_tco_and_replace_same_day(gpu_class, onprem, cloud):
    rate_set(gpu_class=gpu_class, price_per_gpu_hour=Decimal("2.10"), valid_from=date(2026, 1, 1))
    rate = rate_set_from_tco(gpu_class=gpu_class, tco=TCO, valid_from=date(2026, 1, 1))
    assert GpuRate.objects.count() == 1 and rate.source == RateSource.TCO
    assert rate.price_per_gpu_hour == Decimal("2.5325") and rate.tco["gpus"] == "8"
    rate_set(gpu_class=gpu_class, cluster=onprem, price_per_gpu_hour=Decimal("1.90"), valid_from=date(2026, 1, 1))
    assert GpuRate.objects.count() == 2
    with pytest.raises(ValueError, match="billed cost"):
        rate_set(gpu_class=gpu_class, cluster=cloud, price_per_gpu_hour=Decimal("1"), valid_from=date(2026, 1, 1))


@pytest.mark.django_db(transaction=True)
def test_a_second_rate_for_the_same_class_cluster_and_day_is_refused_by_the_database(gpu_class, onprem):
    """update_or_create keeps one row per class, cluster (or fleet-wide) and day; the database
    refuses a second one even where a writer bypasses the service, on SQLite as on PostgreSQL."""
    day = date(2026, 1, 1)
    for cluster in (None, onprem):
        GpuRate.objects.create(gpu_class=gpu_class, cluster=cluster, valid_from=day, price_per_gpu_hour=Decimal("1"))
        with pytest.raises(IntegrityError), transaction.atomic():
            GpuRate.objects.create(gpu_class=gpu_class, cluster=cluster, valid_from=day, price_per_gpu_hour=Decimal("2"))
    assert GpuRate.objects.count() == 2
