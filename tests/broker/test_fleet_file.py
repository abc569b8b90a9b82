"""Fleet descriptions: the demo fleet, building simulated clusters, and clear errors."""
from __future__ import annotations

import textwrap

import pytest

from broker.backends.base import ProjectIdentity, Reason
from broker.backends.simulator import SimClock, SimulatorBackend, SimulatorFleet
from broker.backends.sim.simulated_clusters import FleetSource
from broker.fleet_file import (
    DEMO_FLEET_PATH, FleetError, build_simulated_clusters, load_demo_fleet, load_fleet,
    parse_fleet)
from broker.spec import WorkloadSpec

GOOD = """\
clusters:
  - name: lab
    kind: simulator
    flavor: kueue
    region: eu-west
    location: onprem
    price_per_gpu_hour: 1.0
    nodes:
      - count: 2
        gpu_model: A100
        gpu_memory_gb: 80
        gpus_per_node: 8
        quota: 8
"""


@pytest.fixture
def sim():
    fleet = SimulatorFleet.reset(clock=SimClock())
    yield fleet
    SimulatorFleet.reset()


def problems(text: str) -> list[tuple[str, int | None, str]]:
    with pytest.raises(FleetError) as exc:
        parse_fleet(textwrap.dedent(text), source="f.yaml")
    return [(p.key, p.line, p.message) for p in exc.value.problems]


def with_line(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new)


# --- the demo fleet -------------------------------------------------------------------

def test_demo_fleet_loads():
    fleet = load_demo_fleet()
    assert fleet.names == ["onprem-slurm", "onprem-k8s", "cloud-k8s"]
    slurm, k8s, cloud = fleet.clusters
    assert (slurm.flavor, slurm.region, slurm.location, slurm.price_per_gpu_hour) == (
        "slurm", "eu-west", "onprem", 1.2)
    assert {p.name for p in slurm.partitions} == {"gpu", "mig"}
    assert any(g.partitioning == "1g.10gb" for g in slurm.node_groups)
    assert (k8s.flavor, k8s.region, k8s.price_per_gpu_hour) == ("kueue", "eu-west", 1.5)
    assert {g.gpu_model for g in k8s.node_groups} == {"L4", "A100"}
    assert (cloud.flavor, cloud.region, cloud.location) == ("kueue", "eu-central", "cloud")
    assert (cloud.price_per_gpu_hour, cloud.egress_per_gb) == (4.1, 0.09)
    assert {g.gpu_model for g in cloud.node_groups} == {"H100", "A100"}
    assert "onprem-nfs" in slurm.data_locations and "s3-eu-central" in cloud.data_locations
    assert all(c.simulated for c in fleet.clusters)
    assert fleet.cluster("cloud-k8s") is cloud
    assert str(DEMO_FLEET_PATH).endswith("broker/fleets/demo.yaml")


def test_demo_fleet_builds_working_clusters(sim):
    clusters = build_simulated_clusters(load_demo_fleet())
    assert sorted(sim.names()) == ["cloud-k8s", "onprem-k8s", "onprem-slurm"]
    totals = {c.name: sum(p.gpus_total for p in c.inventory().pools) for c in clusters}
    # cloud-k8s is elastic: one A100 node up, up to 4 A100 and 2 H100 nodes on demand
    assert totals == {"onprem-slurm": 4 * 8 + 4 * 7, "onprem-k8s": 32, "cloud-k8s": 8}
    listed = {c.name: sum(n.gpus_total for p in c.inventory().pools for n in p.nodes) for c in clusters}
    assert listed["cloud-k8s"] == 48
    spec = WorkloadSpec(project="p", name="train", command="x", gpu_models=("A100",),
                        gpus_per_worker=8, workers=4)
    backend = SimulatorBackend("cloud-k8s")
    job_id = backend.submit(spec, "wl-1", ProjectIdentity("t", "p"))
    job = backend.status([job_id])[job_id]
    assert job.reason is Reason.POLICY and "maximum capacity (24)" in job.raw_reason


def test_build_replaces_and_uses_the_fleet_clock(sim):
    first = build_simulated_clusters(parse_fleet(GOOD))[0]
    second = build_simulated_clusters(parse_fleet(GOOD))[0]
    assert sim.get("lab") is second is not first
    assert second.clock is sim.clock and second.quotas == {"a100-80gb": 8}


def test_the_broker_given_fleet_file_autoloads_a_fleet():
    SimulatorFleet.use_source(FleetSource(path=str(DEMO_FLEET_PATH), time_scale=120.0))
    try:
        fleet = SimulatorFleet.reset(autoload=True)
        assert "onprem-slurm" in fleet.names()
    finally:
        SimulatorFleet.use_source(None)
        SimulatorFleet.reset()


def test_load_fleet_from_a_file(tmp_path):
    path = tmp_path / "fleet.yaml"
    path.write_text(GOOD)
    assert load_fleet(path).clusters[0].gpus_total == 16
    with pytest.raises(FleetError, match="missing.yaml"):
        load_fleet(tmp_path / "missing.yaml")


# --- errors name the key and the line -------------------------------------------------

def test_missing_key_is_named_with_the_mapping_line():
    found = problems(with_line("    region: eu-west\n", ""))
    assert found == [("clusters[0].region", 2, "is required")]


def test_wrong_type_names_key_and_line():
    key, line, message = problems(with_line("gpus_per_node: 8", "gpus_per_node: eight"))[0]
    assert (key, line) == ("clusters[0].nodes[0].gpus_per_node", 12)
    assert "whole number" in message and "eight" in message


def test_unknown_key_is_reported():
    key, line, message = problems(with_line("    region: eu-west\n",
                                            "    region: eu-west\n    regoin: x\n"))[0]
    assert (key, line) == ("clusters[0].regoin", 6) and "unknown key" in message


def test_bad_choices_and_ranges():
    text = GOOD.replace("location: onprem", "location: moon").replace(
        "price_per_gpu_hour: 1.0", "price_per_gpu_hour: -2")
    keys = {key for key, _, _ in problems(text)}
    assert keys == {"clusters[0].location", "clusters[0].price_per_gpu_hour"}


def test_bad_mig_profile():
    text = with_line("        quota: 8\n", "        quota: 8\n        partitioning: 9g.1gb\n")
    assert problems(text)[0][0] == "clusters[0].nodes[0].partitioning"


def test_simulator_kind_needs_a_flavor():
    key, _, message = problems(with_line("    flavor: kueue\n", ""))[0]
    assert key == "clusters[0].flavor" and "required" in message


def test_quota_only_on_kueue_and_partitions_only_on_slurm():
    text = GOOD.replace("flavor: kueue", "flavor: volcano")
    assert problems(text)[0][0] == "clusters[0].nodes[0].quota"
    text = with_line("        quota: 8\n", "        quota: 8\n        partition: gpu\n")
    assert ("clusters[0].nodes[0].partition", 14) == problems(text)[0][:2]


def test_node_partition_must_exist():
    text = """\
    clusters:
      - name: hpc
        kind: slurm
        region: eu
        location: onprem
        price_per_gpu_hour: 1
        partitions:
          - {name: gpu, default: true}
        nodes:
          - {count: 1, gpu_model: A100, gpu_memory_gb: 80, gpus_per_node: 8, partition: big}
    """
    key, line, message = problems(text)[0]
    assert (key, line) == ("clusters[0].nodes[0].partition", 10) and "gpu" in message


def test_duplicate_cluster_and_duplicate_key():
    twice = GOOD + GOOD.split("\n", 1)[1]
    key, line, message = problems(twice)[0]
    assert key == "clusters[1].name" and line == 14 and "twice" in message
    key, line, message = problems(with_line("    region: eu-west\n",
                                            "    region: eu-west\n    region: us\n"))[0]
    assert (key, line, message) == ("region", 6, "key given twice")


def test_yaml_syntax_error_has_a_line():
    key, line, _ = problems("clusters:\n  - name: [unclosed\n")[0]
    assert key == "(yaml)" and line is not None


def test_every_problem_is_reported_at_once():
    text = GOOD.replace("gpu_memory_gb: 80", "gpu_memory_gb: 0").replace(
        "kind: simulator", "kind: mesos")
    keys = {key for key, _, _ in problems(text)}
    assert {"clusters[0].kind", "clusters[0].nodes[0].gpu_memory_gb"} <= keys


def test_top_level_shape():
    assert problems("- just a list\n")[0][0] == "(top)"
    assert problems("clusters: []\n")[0][0] == "(top).clusters"
    message = str(pytest.raises(FleetError, parse_fleet, "clusters: 3\n", "x.yaml").value)
    assert "x.yaml:1: (top).clusters" in message


def test_a_shared_group_takes_replicas_and_other_groups_are_told_they_cannot():
    text = GOOD.replace("gpus_per_node: 8", "gpus_per_node: 8\n        partitioning: time-slicing\n        replicas: 8")
    [group] = parse_fleet(text).clusters[0].node_groups
    assert (group.partitioning, group.replicas) == ("time-slicing", 8)
    with pytest.raises(FleetError) as caught:
        parse_fleet(GOOD.replace("gpus_per_node: 8", "gpus_per_node: 8\n        replicas: 8"))
    assert "replicas" in str(caught.value) and "applies to a time-slicing or mps group only" in str(caught.value)


def test_a_shared_groups_replicas_count_among_the_fleets_units():
    from broker.replay.lower_bound import fleet_units  # noqa: PLC0415

    text = GOOD.replace("gpus_per_node: 8", "gpus_per_node: 8\n        partitioning: time-slicing")
    assert fleet_units(parse_fleet(text)) == 2 * 8 * 4 and fleet_units(parse_fleet(GOOD)) == 2 * 8
