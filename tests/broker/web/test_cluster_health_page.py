"""The clusters and fleet pages name the nodes that take no work, with their cluster's reason,
and do not count their GPUs idle."""
from __future__ import annotations

from django.urls import reverse

from broker.models import GpuPool
from broker.services.fleet.inventory import cluster_sync_inventory
from tests.factories import UserFactory


def _unhealthy(sim, make_cluster):
    cluster = make_cluster("onprem-slurm", nodes=[8, 8])
    sim.get("onprem-slurm").set_node("onprem-slurm-n1-01", healthy=False)
    cluster_sync_inventory(cluster_id=cluster.id)
    return cluster


def test_clusters_page_lists_an_unhealthy_node_with_its_reason_and_not_as_idle(trio, sim, make_cluster, login):
    cluster = _unhealthy(sim, make_cluster)
    page = login(trio.member).get(reverse("cluster-list")).content.decode()
    assert 'data-nodes-out="onprem-slurm"' in page and 'data-node="onprem-slurm-n1-01"' in page
    assert "<td>unhealthy</td>" in page and "8 of 8" in page and "set by the simulator&#x27;s node lever" in page
    assert 'data-node="onprem-slurm-n0-01"' not in page  # the healthy node is not listed
    assert sum(p.gpus_idle for p in GpuPool.objects.filter(cluster=cluster)) == 8


def test_fleet_page_names_the_node_out_of_service(trio, sim, make_cluster, login):
    _unhealthy(sim, make_cluster)
    page = login(trio.member).get(reverse("fleet")).content.decode()
    assert "onprem-slurm-n1-01</a>: 8 GPUs, unhealthy (set by the simulator&#x27;s node lever)" in page


def test_a_healthy_fleet_lists_no_node_out(trio, make_cluster, login):
    make_cluster("onprem-slurm", nodes=[8, 8])
    page = login(trio.member).get(reverse("cluster-list")).content.decode()
    assert "data-nodes-out" not in page


def test_someone_outside_every_tenant_sees_no_nodes(trio, sim, make_cluster, client):
    _unhealthy(sim, make_cluster)
    client.force_login(UserFactory(username="nobody"))
    page = client.get(reverse("cluster-list")).content.decode()
    assert "data-nodes-out" not in page and "onprem-slurm-n1-01" not in page


def _levels(make_cluster, count):
    cluster = make_cluster("onprem-slurm", nodes=[8] * count)
    pool = GpuPool.objects.filter(cluster=cluster).first()
    nodes = list(pool.nodes)
    for i, node in enumerate(nodes):
        node["topology"] = [["switch level 1", "spine"], ["switch level 0", f"leaf{i % 2}"]]
    pool.nodes = nodes
    pool.save()


def test_clusters_page_shows_each_topology_level_with_its_domains(trio, make_cluster, login):
    _levels(make_cluster, 3)
    page = login(trio.member).get(reverse("cluster-list")).content.decode()
    assert 'data-topology="onprem-slurm"' in page
    # widest first: the spine holds the three nodes, leaf0 two of them
    spine = page.index('<td>switch level 1</td><td>spine</td><td class="num">3</td><td class="num">24 of 24</td>')
    leaf0 = page.index('<td>switch level 0</td><td>leaf0</td><td class="num">2</td><td class="num">16 of 16</td>')
    assert spine < leaf0 < page.index("<td>leaf1</td>")


def test_a_level_of_one_node_a_domain_is_one_row(trio, make_cluster, login):
    _levels(make_cluster, 2)
    page = login(trio.member).get(reverse("cluster-list")).content.decode()
    assert "<td>switch level 0</td><td>each node its own (2)</td>" in page and "<td>leaf0</td>" not in page


def test_a_cluster_without_levels_shows_no_topology_and_an_outsider_sees_none(trio, make_cluster, login, client):
    make_cluster("onprem-slurm", nodes=[8, 8])
    page = login(trio.member).get(reverse("cluster-list")).content.decode()
    assert "data-topology=" not in page
    client.force_login(UserFactory(username="nobody"))
    assert "data-topology" not in client.get(reverse("cluster-list")).content.decode()
