"""An elastic cloud pool as placement sees it: nodes a cluster may add count as capacity,
taken after the delay, and a job's expected cost there includes the idle tail."""
from __future__ import annotations

import pytest
from django.contrib.admin.sites import AdminSite

from broker.admin import ClusterAdmin
from broker.fleet_file import parse_fleet
from broker.models import Cluster
from broker.services.fleet.inventory import cluster_sync_inventory
from broker.services.fleet.registration import clusters_from_fleet
from broker.services.placing.cycle import workload_place

ELASTIC = {"a100-80gb": {"max_nodes": 3, "gpus_per_node": 8, "provisioning_s": 300, "idle_release_s": 600}}


def _busy_cloud(make_cluster, sim, elastic=ELASTIC):
    """A cloud cluster whose one node is taken; its config says the pool may grow to 3."""
    cloud = make_cluster("cloud", flavor="kueue", location="cloud", price="4.0", nodes=[8])
    sim.get("cloud").inject_foreign_job(gpus_per_worker=8, account="locals", duration_s=36000)
    cluster_sync_inventory(cluster_id=cloud.id)
    config = {"image_pull_s": 0, "provisioning_s": 300, "elastic_pools": elastic}
    Cluster.objects.filter(id=cloud.id).update(config=config)
    return cloud


def test_a_gang_too_big_for_the_nodes_up_goes_where_the_pool_can_grow_with_its_delay(make_cluster, sim, submit):
    _busy_cloud(make_cluster, sim)
    # the decision (this simulated cluster itself does not grow: sim.elastic's do)
    workload = workload_place(workload_id=submit(gpus_per_worker=8, workers=2, time_limit_minutes=60).id)
    assert workload.state == "reserved"
    chosen = workload.placement["chosen"]
    assert workload.cluster.name == "cloud" and chosen["assignment"] == [
        "a100-80gb-provisionable-01", "a100-80gb-provisionable-02"]
    assert chosen["breakdown"]["startup_s"] == 300.0
    # 16 GPU-hours, and 16 GPUs x 10 min of idle tail: 16 x 4.0 + 16 x 4.0 / 6
    assert chosen["breakdown"]["gpu_cost"] == pytest.approx(64.0 + 64.0 / 6)


def test_without_an_elastic_pool_the_same_gang_could_never_run_there(make_cluster, sim, submit):
    _busy_cloud(make_cluster, sim, elastic={})
    workload = workload_place(workload_id=submit(gpus_per_worker=8, workers=2).id)
    assert workload.state == "rejected" and workload.cluster is None


def test_an_elastic_pool_never_adds_beyond_its_maximum(make_cluster, sim, submit):
    _busy_cloud(make_cluster, sim)
    workload = workload_place(workload_id=submit(gpus_per_worker=8, workers=3).id)  # 3 nodes, 1 taken
    assert workload.state == "waiting" and workload.cluster is None


def test_a_fleet_files_elastic_group_registers_its_pool_and_the_longest_delay(db):
    fleet = parse_fleet("""
clusters:
  - name: cloud
    kind: simulator
    flavor: kueue
    region: eu
    location: cloud
    price_per_gpu_hour: 4.0
    provisioning_s: 60
    nodes:
      - {count: 0, max_nodes: 4, gpu_model: A100, gpu_memory_gb: 80, gpus_per_node: 8}
""", source="f.yaml")
    [cluster] = clusters_from_fleet(fleet=fleet)
    assert cluster.config["elastic_pools"] == {
        "a100-80gb": {"max_nodes": 4, "gpus_per_node": 8, "provisioning_s": 480.0, "idle_release_s": 600.0}}
    assert cluster.config["provisioning_s"] == 480.0


@pytest.mark.parametrize("pools, field", [
    ({"a100-80gb": {"gpus_per_node": 8}}, "elastic_pools.a100-80gb.max_nodes: required"),
    ({"a100-80gb": {"max_nodes": 0, "gpus_per_node": 8}}, "elastic_pools.a100-80gb.max_nodes: must be"),
    ({"a100-80gb": {"max_nodes": 2, "gpus_per_node": 8, "idle_release_s": -1}},
     "elastic_pools.a100-80gb.idle_release_s: must be"),
    ({"a100-80gb": {"max_nodes": 2, "gpus_per_node": 8, "colour": "red"}}, "elastic_pools.a100-80gb.colour: unknown"),
])
def test_the_admin_refuses_a_bad_elastic_pool_naming_the_field(db, pools, field):
    form_class = ClusterAdmin(Cluster, AdminSite()).get_form(None)
    form = form_class(data={"name": "c", "kind": "simulator", "region": "eu", "location": "cloud",
                            "price_per_gpu_hour": "4.0", "egress_per_gb": "0", "config": '{"elastic_pools": %s}'
                            % __import__("json").dumps(pools), "health": "healthy", "enabled": True})
    assert not form.is_valid()
    assert field in " ".join(form.errors.get("config", []))
