"""/fleet/ counts MIG slices apart from whole GPUs: seven 1g.10gb slices are not seven A100s."""
from __future__ import annotations

from django.urls import reverse

from broker.overview_selectors import overview


def test_mig_slices_are_counted_apart_from_whole_gpus(trio, make_cluster):
    make_cluster("gpu", nodes=[8], gpu_model="A100", memory_gb=80)
    make_cluster("gpu-mig", nodes=[2], gpu_model="A100", memory_gb=80, partitioning="1g.10gb")
    capacity = dict(overview(user=trio.member)["capacity"])
    assert capacity[("gpu", "A100")]["gpus_total"] == 8
    assert capacity[("gpu-mig", "A100 MIG 1g.10gb slices")]["gpus_total"] == 14  # 2 GPUs x 7 slices
    assert ("gpu-mig", "A100") not in capacity


def test_fleet_page_shows_mig_slices_on_their_own_line(trio, make_cluster, login):
    make_cluster("mixed", nodes=[8], gpu_model="A100", memory_gb=80)
    make_cluster("mig", nodes=[1], gpu_model="A100", memory_gb=80, partitioning="1g.10gb")
    body = login(trio.member).get(reverse("fleet")).content.decode()
    assert "A100 MIG 1g.10gb slices" in body
    # the fleet is shared infrastructure: a member of another tenant sees the same lines
    outsider = login(trio.outsider).get(reverse("fleet")).content.decode()
    assert "A100 MIG 1g.10gb slices" in outsider


def test_fleet_page_shows_the_wait_estimators_error_from_started_workloads(trio, make_cluster, login, submit,
                                                                           drive, poll):
    from broker.models import Workload  # noqa: PLC0415
    cluster = make_cluster("gpu", nodes=[8])
    workload = drive(submit(gpus_per_worker=2))
    poll(cluster)
    placement = {**Workload.objects.get(id=workload.id).placement, "predicted_wait_s": 600.0}
    Workload.objects.filter(id=workload.id).update(placement=placement)
    body = login(trio.member).get(reverse("fleet")).content.decode()
    assert "Wait estimator error" in body and "over 1 started workloads" in body
    figures = overview(user=trio.member)["figures"]["wait_estimate"]
    assert figures.count == 1 and 500 < figures.mean_abs_s <= 600
    # a member of another tenant sees no error figure built from this tenant's workloads
    outsider = login(trio.outsider).get(reverse("fleet")).content.decode()
    assert "no prediction has started yet" in outsider
