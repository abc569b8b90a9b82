"""Global quota: reservations never exceed limit + borrowing, also under concurrency."""
from __future__ import annotations

import threading

import pytest
from django.db import connection

from broker.models import Cluster, Quota, Reservation
from broker.services.quota.reservations import QuotaBelowUse, QuotaExceeded, quota_set, quota_use, reservation_create
from tests.factories import ClusterFactory, WorkloadFactory


def _workloads(trio, gpu_class, n: int, gpus: int) -> list:
    return [WorkloadFactory(project=trio.project, gpu_class=gpu_class, total_gpus=gpus) for _ in range(n)]


def test_reservation_beyond_quota_plus_borrowing_is_refused_with_numbers(trio, gpu_classes):
    a100 = gpu_classes["a100-80gb"]
    Quota.objects.create(tenant=trio.tenant, gpu_class=a100, limit_gpus=4, borrow_limit_gpus=2)
    cluster = ClusterFactory()
    first, second = _workloads(trio, a100, 2, 4)
    reservation_create(workload=first, cluster=cluster, ttl_s=60)
    with pytest.raises(QuotaExceeded) as exc:
        reservation_create(workload=second, cluster=cluster, ttl_s=60)
    assert "4 of 6 GPUs" in str(exc.value) and "4 more needed" in str(exc.value)
    assert quota_use(tenant_id=trio.tenant.id, gpu_class_id=a100.id).remaining == 2


def test_retrying_a_reservation_does_not_count_the_workload_twice(trio, gpu_classes):
    a100 = gpu_classes["a100-80gb"]
    Quota.objects.create(tenant=trio.tenant, gpu_class=a100, limit_gpus=4)
    cluster = ClusterFactory()
    (workload,) = _workloads(trio, a100, 1, 4)
    one = reservation_create(workload=workload, cluster=cluster, ttl_s=60)
    two = reservation_create(workload=workload, cluster=cluster, ttl_s=60)
    assert one.id == two.id and Reservation.objects.count() == 1


def test_no_quota_row_means_no_gpus(trio, gpu_classes):
    (workload,) = _workloads(trio, gpu_classes["h100"], 1, 1)
    with pytest.raises(QuotaExceeded):
        reservation_create(workload=workload, cluster=ClusterFactory(), ttl_s=60)


def test_admin_cannot_lower_quota_below_what_is_reserved_and_running(trio, gpu_classes):
    a100 = gpu_classes["a100-80gb"]
    Quota.objects.create(tenant=trio.tenant, gpu_class=a100, limit_gpus=8)
    (workload,) = _workloads(trio, a100, 1, 6)
    reservation_create(workload=workload, cluster=ClusterFactory(), ttl_s=60)
    with pytest.raises(QuotaBelowUse) as exc:
        quota_set(actor=trio.owner, tenant_id=trio.tenant.id, gpu_class_id=a100.id, limit_gpus=5)
    assert "5 GPUs is below the 6 GPUs" in str(exc.value)
    quota = quota_set(actor=trio.owner, tenant_id=trio.tenant.id, gpu_class_id=a100.id, limit_gpus=12)
    assert quota.limit_gpus == 12


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_reservations_never_exceed_the_quota(trio, gpu_classes):
    a100 = gpu_classes["a100-80gb"]
    Quota.objects.create(tenant=trio.tenant, gpu_class=a100, limit_gpus=10)
    cluster = ClusterFactory()
    workloads = _workloads(trio, a100, 24, 2)
    barrier = threading.Barrier(len(workloads))
    outcomes: list[str] = []

    def reserve(workload) -> None:
        barrier.wait()
        try:
            reservation_create(workload=workload, cluster=Cluster.objects.get(id=cluster.id), ttl_s=60)
            outcomes.append("ok")
        except QuotaExceeded:
            outcomes.append("refused")
        finally:
            connection.close()

    threads = [threading.Thread(target=reserve, args=(w,)) for w in workloads]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert outcomes.count("ok") == 5 and outcomes.count("refused") == 19
    assert quota_use(tenant_id=trio.tenant.id, gpu_class_id=a100.id).used == 10
