"""The clusters page shows each cluster's local limits as its last report gave them."""
from __future__ import annotations

from django.urls import reverse

from broker.backends.sim import Partition
from tests.factories import UserFactory


def test_clusters_page_shows_qos_cap_and_clusterqueue_quota_with_headroom(trio, make_cluster, login):
    make_cluster("onprem-slurm", nodes=[8, 8], partitions=[Partition("gpu", 16, True)])
    make_cluster("cloud-k8s", flavor="kueue", nodes=[8, 8, 8], location="cloud", quotas={"a100-80gb": 24})
    page = login(trio.member).get(reverse("cluster-list")).content.decode()
    assert 'data-limits="onprem-slurm"' in page and 'data-limits="cloud-k8s"' in page
    assert "QoS of partition gpu (MaxTRESPerJob=gres/gpu=16)" in page and "per job: 16 GPUs" in page
    assert "ClusterQueue cloud-k8s flavor a100-80gb" in page and "<td>24 GPUs</td>" in page


def test_clusters_page_shows_no_limits_to_someone_outside_every_tenant(trio, make_cluster, client):
    make_cluster("onprem-slurm", nodes=[8], partitions=[Partition("gpu", 16, True)])
    outsider = UserFactory(username="nobody")
    client.force_login(outsider)
    page = client.get(reverse("cluster-list")).content.decode()
    assert "data-limits" not in page and "MaxTRESPerJob" not in page


def test_clusters_page_shows_a_slurm_clusters_fair_share_in_one_row(trio, make_cluster, login):
    make_cluster("onprem-slurm", nodes=[8, 8], share_points={"physics": 100000.0, "chem": 1351.0})
    page = login(trio.member).get(reverse("cluster-list")).content.decode()
    assert "fair share (Slurm&#x27;s multifactor priority)" in page  # the template escapes the quote
    assert "queue order: 2 accounts, factor 0.01 (chem) to 1.00 (physics)" in page
