"""The demo's outage switch: an operator cuts a simulated cluster off and reconnects it."""
from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied

from broker.models import AuditRecord, Cluster
from demo.outage import OutageRefused, cluster_outage_set, simulated_outages
from tests.factories import UserFactory


@pytest.fixture
def operator(db):
    return UserFactory(username="operator", is_staff=True)


def test_an_outage_makes_the_cluster_stale_not_idle_and_ending_it_makes_it_healthy(operator, make_cluster, sim):
    cluster = make_cluster("onprem")
    before = {p.name: (p.gpus_total, p.gpus_idle, p.taken_at) for p in cluster.pools.all()}

    cut = cluster_outage_set(actor=operator, cluster_id=cluster.id, unreachable=True)
    assert cut.health == "stale" and "simulated outage" in cut.last_error
    assert sim.get("onprem").faults.unreachable and simulated_outages() == {"onprem": True}
    # stale, never idle: the pools keep their last report and its time
    assert {p.name: (p.gpus_total, p.gpus_idle, p.taken_at) for p in cut.pools.all()} == before

    back = cluster_outage_set(actor=operator, cluster_id=cluster.id, unreachable=False)
    assert back.health == "healthy" and back.last_error == "" and simulated_outages() == {"onprem": False}
    actions = list(AuditRecord.objects.filter(cluster="onprem", actor=operator).values_list("action", flat=True)
                   .order_by("id"))
    assert actions == ["cluster.outage_simulated", "cluster.outage_ended"]


def test_placement_holds_work_off_a_cluster_in_outage(operator, make_cluster, submit, drive):
    onprem, other = make_cluster("onprem"), make_cluster("spare", price="9")
    cluster_outage_set(actor=operator, cluster_id=onprem.id, unreachable=True)
    workload = drive(submit(gpus_per_worker=2))
    assert workload.cluster_id == other.id
    assert "onprem" in workload.placement["excluded"]


@pytest.mark.parametrize("who", ["owner", "member", "finance", "outsider"])
def test_only_platform_operators_switch_outages(trio, make_cluster, sim, who):
    cluster = make_cluster("onprem")
    with pytest.raises(PermissionDenied):
        cluster_outage_set(actor=getattr(trio, who), cluster_id=cluster.id, unreachable=True)
    assert not sim.get("onprem").faults.unreachable
    assert not AuditRecord.objects.filter(action__startswith="cluster.outage").exists()


def test_a_real_cluster_has_no_outage_switch(operator):
    cluster = Cluster.objects.create(name="hpc", kind="slurm", region="eu", location="onprem")
    with pytest.raises(OutageRefused, match="only simulated clusters"):
        cluster_outage_set(actor=operator, cluster_id=cluster.id, unreachable=True)


def test_the_switch_is_refused_when_the_fleet_runs_in_a_separate_worker(operator, make_cluster, sim):
    from config.celery import app

    cluster = make_cluster("onprem")
    app.conf.task_always_eager = False  # the autouse fixture puts it back
    with pytest.raises(OutageRefused, match="runs in the Celery worker"):
        cluster_outage_set(actor=operator, cluster_id=cluster.id, unreachable=True)
    assert not sim.get("onprem").faults.unreachable and simulated_outages() == {}
