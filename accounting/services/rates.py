"""GPU-hour rates for on-prem GPU classes: set directly, or from a total-cost-of-ownership entry.

Cloud GPUs are never priced here: they are charged at what the cloud bill says.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import date
from decimal import Decimal

from django.contrib.auth.models import User
from django.db import transaction

from accounting.models import GpuRate, RateSource
from broker.models import Cluster, GpuClass, Location
from broker.services.records.audit import audit

HOURS_PER_YEAR = Decimal("8760")
_CENT_OF_CENT = Decimal("0.0001")


@dataclass(frozen=True)
class TcoInputs:
    """Yearly cost of a GPU system, spread over the GPU-hours it actually sells."""

    hardware_cost: Decimal  # purchase price of the servers, amortised linearly
    life_years: Decimal
    power_kw: Decimal  # average draw of the whole system, cooling included
    price_per_kwh: Decimal
    support_per_year: Decimal
    staff_per_year: Decimal
    gpus: int
    utilisation: Decimal  # fraction of hours the GPUs are busy (and so chargeable)

    def check(self) -> None:
        if self.life_years <= 0 or self.gpus <= 0:
            raise ValueError("life years and GPUs must be positive")
        if not Decimal("0") < self.utilisation <= Decimal("1"):
            raise ValueError("utilisation is a fraction in (0, 1]")
        money = (self.hardware_cost, self.power_kw, self.price_per_kwh, self.support_per_year, self.staff_per_year)
        if any(v < 0 for v in money):
            raise ValueError("costs cannot be negative")


def tco_price(tco: TcoInputs) -> Decimal:
    """(hardware / life + power kW x 8760 h x price/kWh + support + staff) / (GPUs x 8760 h x utilisation)."""
    tco.check()
    yearly = (
        tco.hardware_cost / tco.life_years
        + tco.power_kw * HOURS_PER_YEAR * tco.price_per_kwh
        + tco.support_per_year
        + tco.staff_per_year
    )
    sold_hours = tco.gpus * HOURS_PER_YEAR * tco.utilisation
    return (yearly / sold_hours).quantize(_CENT_OF_CENT)


@transaction.atomic
def rate_set(
    *,
    gpu_class: GpuClass,
    price_per_gpu_hour: Decimal,
    valid_from: date,
    cluster: Cluster | None = None,
    actor: User | None = None,
) -> GpuRate:
    return _save(
        gpu_class=gpu_class,
        cluster=cluster,
        valid_from=valid_from,
        price=price_per_gpu_hour,
        source=RateSource.DIRECT,
        tco={},
        actor=actor,
    )


@transaction.atomic
def rate_set_from_tco(
    *,
    gpu_class: GpuClass,
    tco: TcoInputs,
    valid_from: date,
    cluster: Cluster | None = None,
    actor: User | None = None,
) -> GpuRate:
    inputs = {k: str(v) for k, v in asdict(tco).items()}
    return _save(
        gpu_class=gpu_class,
        cluster=cluster,
        valid_from=valid_from,
        price=tco_price(tco),
        source=RateSource.TCO,
        tco=inputs,
        actor=actor,
    )


def _save(
    *,
    gpu_class: GpuClass,
    cluster: Cluster | None,
    valid_from: date,
    price: Decimal,
    source: str,
    tco: dict[str, str],
    actor: User | None,
) -> GpuRate:
    if cluster is not None and cluster.location != Location.ONPREM:
        raise ValueError(f"{cluster.name} is a cloud cluster: it is charged at billed cost")
    if price < 0:
        raise ValueError("a price cannot be negative")
    rate, _ = GpuRate.objects.update_or_create(
        gpu_class=gpu_class,
        cluster=cluster,
        valid_from=valid_from,
        defaults={"price_per_gpu_hour": price, "source": source, "tco": tco},
    )
    audit(
        action="accounting.rate_set",
        actor=actor,
        cluster=cluster.name if cluster else "",
        message=f"{gpu_class.slug} from {valid_from}: {price}/GPU-h ({source})",
        inputs={"gpu_class": gpu_class.slug, "valid_from": str(valid_from), "price": str(price), "tco": tco},
    )
    return rate
