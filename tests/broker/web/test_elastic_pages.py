"""The elastic cloud is visible: its nodes up, provisioning and on demand, its delay and its
idle tail, on /clusters/ and /fleet/."""
from __future__ import annotations

from django.urls import reverse

from broker.backends.base import ProjectIdentity
from broker.backends.sim.model import NodeGroup
from broker.models import Cluster
from broker.services.fleet.inventory import cluster_sync_inventory
from broker.spec import validate_spec


def _elastic_cloud(sim):
    group = NodeGroup(count=1, max_count=3, gpu_model="A100", gpu_memory_gb=80, gpus_per_node=8,
                      provisioning_s=480, idle_release_s=600, name_prefix="cloud-")
    sim.add_cluster("cloud", "kueue", node_groups=[group])
    cluster = Cluster.objects.create(name="cloud", kind="simulator", region="eu", location="cloud",
                                     price_per_gpu_hour="4.0", config={"elastic_pools": {"a100-80gb": {
                                         "max_nodes": 3, "gpus_per_node": 8, "provisioning_s": 480,
                                         "idle_release_s": 600}}})
    spec = validate_spec({"project": "p", "name": "big", "command": "sleep 1", "gpus_per_worker": 8,
                          "workers": 2, "gpu_models": ["A100"], "time_limit_minutes": 60})
    sim.get("cloud").submit(spec, None, ProjectIdentity(tenant="t", project="p"))  # a local user's: 1 node asked for
    cluster_sync_inventory(cluster_id=cluster.id)
    return cluster


def test_the_clusters_page_shows_an_elastic_pools_nodes_delay_and_idle_tail(trio, sim, login):
    _elastic_cloud(sim)
    page = login(trio.member).get(reverse("cluster-list")).content.decode()
    assert ("Elastic pool <strong>a100-80gb</strong>: 1 up, 1 provisioning, 1 more on demand "
            "(max 3; each in 8 min, billed until 10 min idle)") in page


def test_the_fleet_page_lists_the_elastic_pools_per_cluster(trio, sim, login):
    _elastic_cloud(sim)
    page = login(trio.member).get(reverse("fleet")).content.decode()
    assert "a100-80gb: 1 up, 1 provisioning, 1 more on demand" in page


def test_an_elastic_pools_totals_count_only_the_nodes_up(trio, sim, db):
    cluster = _elastic_cloud(sim)
    pool = cluster.pools.get()
    assert (pool.gpus_total, len(pool.nodes)) == (8, 3)


def test_someone_outside_every_tenant_sees_no_elastic_pool(trio, sim, client):
    from tests.factories import UserFactory  # noqa: PLC0415

    _elastic_cloud(sim)
    client.force_login(UserFactory(username="nobody"))
    for name in ("cluster-list", "fleet"):
        page = client.get(reverse(name)).content.decode()
        assert "data-elastic" not in page.replace("data-elastic-cell", "") and "more on demand" not in page
