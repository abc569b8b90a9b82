"""Fixtures for the REST API tests: a JSON client per user, and objects in tenant A."""
from __future__ import annotations

import pytest

from broker.models import Escalation, Quota


@pytest.fixture
def cluster(make_cluster):
    return make_cluster("onprem")


@pytest.fixture
def placed(cluster, submit, drive):
    """A 2 x 2-GPU workload of tenant A, queued on the 'onprem' cluster."""
    return drive(submit(gpus_per_worker=2, workers=2))


@pytest.fixture
def escalation(trio, cluster, sim) -> Escalation:
    """An orphan job on 'onprem', attributed to tenant A."""
    from broker.services.following.reconcile import reconcile_fleet

    sim.get("onprem").inject_foreign_job(gpus_per_worker=2, workload_id="wl-lost")
    reconcile_fleet()
    esc = Escalation.objects.get()
    Escalation.objects.filter(id=esc.id).update(tenant=trio.tenant)
    esc.refresh_from_db()
    return esc


@pytest.fixture
def quota_a(quota) -> Quota:
    return quota
