"""Fixtures of the accounting tests: a GPU class, an on-prem and a cloud cluster."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal

import pytest

from accounting.services.bills import bill_import
from accounting.services.rates import rate_set
from accounting.services.usage import usage_ingest
from tests.accounting.helpers import FIXTURES, T0, usage
from tests.factories import ClusterFactory, GpuClassFactory, UserFactory, WorkloadFactory


@pytest.fixture
def gpu_class(db):
    return GpuClassFactory()


@pytest.fixture
def onprem(db):
    return ClusterFactory(name="hpc", kind="slurm", location="onprem", price_per_gpu_hour=Decimal("1.20"))


@pytest.fixture
def cloud(db):
    return ClusterFactory(name="aws-eu", kind="kueue", location="cloud", price_per_gpu_hour=Decimal("4.00"))


@pytest.fixture
def operator(db):
    return UserFactory(username="operator", is_staff=True)


@dataclass
class Books:
    """A month of usage and a bill for both tenants, with hand-computed chargeback."""

    bill: object
    other_bill: object


@pytest.fixture
def books(trio, gpu_class, onprem, cloud) -> Books:
    """November 2026 (and one October job); the A100 class costs 2.00/GPU-h on-prem from January.

    physics/lattice  on-prem a100: 2 GPU x 1 h + 8 GPU x 1.5 h = 14 GPU-h -> 28.00
                     on-prem unclassified (mi250, list price 1.20): 1 GPU-h -> 1.20
                     cloud a100: 4 GPU x 0.5 h = 2 GPU-h, bill lines of workload a1: 65.5452 -> 65.55
                     cloud unclassified: the EBS line 0.0425806452 -> 0.04
    physics/(unassigned) cloud unclassified: the p5 and g5 lines 98.32 + 1.124 -> 99.44
    biology/genomes  on-prem a100: 1 GPU x 2 h = 2 GPU-h -> 4.00
    (unassigned)     on-prem a100: 'mystery' account, 1 GPU-h -> 2.00 (operators only)
    October: physics/lattice on-prem a100 1 GPU-h -> 2.00
    """
    rate_set(gpu_class=gpu_class, price_per_gpu_hour=Decimal("2.00"), valid_from=date(2026, 1, 1))
    wl = WorkloadFactory(project=trio.project, gpu_class=gpu_class, cluster=cloud, uid="wl-00000000000000a1",
                         total_gpus=4, state="completed", started_at=T0, ended_at=T0 + timedelta(seconds=1800))
    usage_ingest(cluster=onprem, records=[
        usage("1", gpus=2, seconds=3600), usage("2", gpus=8, seconds=5400),
        usage("3", gpus=1, seconds=3600, gpu_model="mi250"),
        usage("4", account="genomes", gpus=1, seconds=7200),
        usage("5", account="mystery", gpus=1, seconds=3600),
        usage("6", gpus=1, seconds=3600, start=T0 - timedelta(days=30)),
    ])
    usage_ingest(cluster=cloud, records=[usage("lattice/a1", cluster="aws-eu", source="kueue", gpus=4,
                                               seconds=1800, workload_id=wl.uid)])
    with (FIXTURES / "aws_cur.csv").open("rb") as f:
        bill = bill_import(provider="aws", file_name="aws_cur.csv", content=f, tenant=trio.tenant,
                           cluster=cloud).bill
    with (FIXTURES / "gcp_billing_label_columns.csv").open("rb") as f:
        other = bill_import(provider="gcp", file_name="other.csv", content=f, tenant=trio.other_tenant).bill
    return Books(bill=bill, other_bill=other)
