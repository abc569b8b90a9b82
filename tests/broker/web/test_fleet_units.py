"""/fleet/ counts MIG slices apart from whole GPUs: seven 1g.10gb slices are not seven A100s."""
from __future__ import annotations

from django.urls import reverse

from broker.selectors.overview import overview


def test_mig_slices_are_counted_apart_from_whole_gpus(trio, make_cluster):
    make_cluster("gpu", nodes=[8], gpu_model="A100", memory_gb=80)
    make_cluster("gpu-mig", nodes=[2], gpu_model="A100", memory_gb=80, partitioning="1g.10gb")
    capacity = dict(overview(user=trio.member)["capacity"])
    assert capacity[("gpu", "A100")]["gpus_total"] == 8
    assert capacity[("gpu-mig", "A100 MIG 1g.10gb slices")]["gpus_total"] == 14  # 2 GPUs x 7 slices
    assert ("gpu-mig", "A100") not in capacity


def test_time_sliced_shares_are_counted_apart_from_whole_gpus(trio, make_cluster):
    make_cluster("shared", nodes=[2], gpu_model="A100", memory_gb=80, partitioning="time-slicing")
    capacity = dict(overview(user=trio.member)["capacity"])
    assert capacity[("shared", "A100 time-slicing shares")]["gpus_total"] == 8  # 2 GPUs x 4 replicas
    assert ("shared", "A100") not in capacity


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


def test_fleet_page_splits_the_estimators_error_per_cluster_and_pool_for_the_tenants_own(
        trio, make_cluster, login, submit, drive, poll):
    from broker.models import Workload  # noqa: PLC0415
    cluster = make_cluster("gpu", nodes=[8])
    workload = drive(submit(gpus_per_worker=2))
    poll(cluster)
    placement = {**Workload.objects.get(id=workload.id).placement, "predicted_wait_s": 1200.0}
    Workload.objects.filter(id=workload.id).update(placement=placement)
    pool = placement["chosen"]["pool"]
    body = login(trio.member).get(reverse("fleet")).content.decode()
    live = body[body.index('id="estimator-live"'):body.index('id="estimator-replays"')]
    assert f"<td>gpu</td><td>{pool}</td><td>1</td>" in live
    outsider = login(trio.outsider).get(reverse("fleet")).content.decode()
    assert "No workload with a prediction has started in the last 7 days." in outsider
    assert f"<td>gpu</td><td>{pool}</td>" not in outsider


def test_fleet_page_shows_the_recorded_replays_estimator_error_to_members_only(trio, login, client):
    from broker.services.placing.replay_estimates import ReplayEstimateRun, record_replay_estimates  # noqa: PLC0415
    from broker.placement.wait_estimator import estimator_report  # noqa: PLC0415
    from tests.factories import UserFactory  # noqa: PLC0415

    empty = login(trio.member).get(reverse("fleet")).content.decode()
    assert "No replay recorded yet" in empty
    report = estimator_report([("onprem-slurm", "a100-80gb", 900.0, 300.0), ("cloud-k8s", "a100-80gb", 0.0, 0.0)])
    assert report is not None
    record_replay_estimates(runs=[ReplayEstimateRun(trace="alibaba-gpu.csv", half="second", time_compress=5.0,
                                                    seed=11, policy="default", jobs=780, report=report)])
    for user in (trio.member, trio.outsider):  # synthetic tenants on a simulated fleet: the fleet's to see
        body = login(user).get(reverse("fleet")).content.decode()
        replays = body[body.index('id="estimator-replays"'):]
        assert "alibaba-gpu.csv" in replays and "<td>second</td><td>x5</td><td>11</td><td>default</td>" in replays
        assert "onprem-slurm/a100-80gb: 10.0 (1)" in replays and "cloud-k8s/a100-80gb: 0.0 (1)" in replays
    client.logout()
    assert client.get(reverse("fleet")).status_code == 302  # to the login page
    nobody = login(UserFactory(username="nobody")).get(reverse("fleet"))  # a member of no tenant
    assert nobody.status_code == 200 and "alibaba-gpu.csv" not in nobody.content.decode()


def _calibration(**over):
    from broker.services.fleet.calibration import CalibrationFigures  # noqa: PLC0415
    rep = {"jobs": 36, "started_both": 33, "waited": 32, "pairs": 528, "pair_order": 0.97,
           "median_abs_error_s": 1.5, "p95_abs_error_s": 9.0, "reason_samples": 400, "reason_agreement": 0.9,
           "ahead_real": ["a"], "ahead_sim": ["a"], "backfilled_real": ["a"], "errors_s": {"a": 1.5}}
    return CalibrationFigures(cluster="ci", control_plane="slurm 22.05.8", partition="calib",
                              job_list="contended-16gpu", commit="abc1234", scheduler="sched_interval=10 bf_interval=2",
                              cycle_s=2.0, repetitions=[rep, {**rep, "pair_order": 0.95, **over}, rep])


def test_fleet_page_shows_the_latest_calibration_of_the_simulator_beside_the_estimator(trio, login, client):
    from broker.services.fleet.calibration import calibration_record  # noqa: PLC0415
    from tests.factories import UserFactory  # noqa: PLC0415

    assert "No calibration recorded yet" in login(trio.member).get(reverse("fleet")).content.decode()
    row = calibration_record(figures=_calibration())
    assert (row.pair_order, row.median_abs_error_s, row.jobs) == (0.97, 1.5, 36)  # medians of the repetitions
    for user in (trio.member, trio.outsider):  # figures about the simulator, not about a tenant
        body = login(user).get(reverse("fleet")).content.decode()
        shown = body[body.index('id="calibrations"'):]
        assert "<td>slurm 22.05.8</td><td>ci / calib</td><td>contended-16gpu</td><td><code>abc1234</code></td>" in shown
        assert "<td>3</td><td>36</td><td>97%</td><td>1.5 s</td><td>9.0 s</td><td>90%</td>" in shown
    nobody = login(UserFactory(username="nobody")).get(reverse("fleet")).content.decode()
    assert "abc1234" not in nobody and "No calibration recorded yet" in nobody


def test_a_calibration_with_a_figure_that_is_not_a_number_is_refused_naming_it(db):
    import pytest  # noqa: PLC0415

    from broker.models import SimulatorCalibration  # noqa: PLC0415
    from broker.services.fleet.calibration import calibration_record  # noqa: PLC0415

    with pytest.raises(ValueError, match="a repetition's pair_order is not a number: 'most'"):
        calibration_record(figures=_calibration(pair_order="most"))
    assert not SimulatorCalibration.objects.exists()
