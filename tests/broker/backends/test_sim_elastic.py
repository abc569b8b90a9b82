"""An elastic cloud pool in the simulator (sim.elastic): nodes come on demand after their
provisioning delay, are billed from request to release, idle included, and go after their
idle time."""
from __future__ import annotations

import pytest

from broker.backends.base import JobState, ProjectIdentity
from broker.backends.sim.clock import SimClock
from broker.backends.sim.cluster import SimulatedCluster
from broker.backends.sim.model import NodeGroup
from broker.fleet_file import FleetError, parse_fleet
from broker.spec import validate_spec


def _cloud(minimum: int = 0, maximum: int = 2) -> SimulatedCluster:
    group = NodeGroup(count=minimum, gpu_model="A100", gpu_memory_gb=80, gpus_per_node=8, max_count=maximum,
                      provisioning_s=480.0, idle_release_s=600.0, name_prefix="cloud-")
    return SimulatedCluster("cloud", "kueue", node_groups=[group], clock=SimClock(), queueing="backfill")


def _submit(sim: SimulatedCluster, name: str, gpus: int, run_s: float, workers: int = 1) -> str:
    spec = validate_spec({"project": "p", "name": name, "command": "sleep 1", "gpus_per_worker": gpus,
                          "workers": workers, "gpu_models": ["A100"], "time_limit_minutes": 600})
    sim.runtimes.set(name, run_s)
    return sim.submit(spec, name, ProjectIdentity(tenant="t", project="p"))


def _at(sim: SimulatedCluster, t: float) -> None:
    sim.clock.advance(t - sim.clock.seconds + sim._created)
    sim.tick()


def _states(sim: SimulatedCluster) -> list[str]:
    return [n.provisioning for p in sim.inventory().pools for n in p.nodes]


def test_a_job_that_fits_no_node_up_waits_the_provisioning_delay_then_starts():
    sim = _cloud()
    assert _states(sim) == ["available", "available"]
    job = _submit(sim, "train", 8, run_s=600)
    assert sim.job(job).state is JobState.PENDING
    assert _states(sim) == ["requested", "available"]  # one node asked for: one is enough
    _at(sim, 479)
    assert sim.job(job).state is JobState.PENDING
    _at(sim, 480)
    assert sim.job(job).state is JobState.RUNNING and sim.job(job).started_at - sim._created == 480
    assert _states(sim) == ["", "available"]


def test_a_gang_asks_for_as_many_nodes_as_its_workers_need_and_no_more_than_the_maximum():
    sim = _cloud(maximum=3)
    gang = _submit(sim, "gang", 8, run_s=60, workers=2)
    assert _states(sim) == ["requested", "requested", "available"]
    too_big = _submit(sim, "too-big", 8, run_s=60, workers=4)
    assert sim.job(too_big).state is JobState.PENDING
    assert _states(sim) == ["requested", "requested", "available"]  # 4 nodes could never come
    _at(sim, 480)
    assert sim.job(gang).state is JobState.RUNNING


def test_the_bill_runs_from_request_to_release_idle_included_and_the_node_goes_after_its_idle_time():
    sim = _cloud()
    _submit(sim, "train", 8, run_s=600)  # requested at 0, up at 480, ends at 1080
    _at(sim, 1679)
    assert _states(sim)[0] == ""  # idle 599 s: still up, still billed
    _at(sim, 1680)
    assert _states(sim)[0] == "available"  # released after 600 s idle
    _at(sim, 5000)
    assert sim.billed_node_seconds() == {"a100-80gb": 1680.0}
    # 1680 node-s x 8 GPUs billed, 600 s x 8 GPUs used: provisioning and the idle tail
    assert sim.idle_billed_gpu_seconds() == (1680 - 600) * 8


def test_a_job_arriving_while_the_node_idles_takes_it_without_a_new_request():
    sim = _cloud()
    _submit(sim, "first", 8, run_s=100)  # up at 480, idle from 580
    _at(sim, 900)
    second = _submit(sim, "second", 8, run_s=100)
    assert sim.job(second).state is JobState.RUNNING and sim.job(second).started_at - sim._created == 900
    assert _states(sim) == ["", "available"]
    _at(sim, 1600)  # idle since 1000: released at 1600
    assert sim.billed_node_seconds() == {"a100-80gb": 1600.0}


def test_the_minimum_stays_up_unbilled_by_the_elastic_bill():
    sim = _cloud(minimum=1, maximum=2)
    assert _states(sim) == ["", "available"]
    job = _submit(sim, "train", 8, run_s=60)
    assert sim.job(job).state is JobState.RUNNING  # on the node always up
    _at(sim, 4000)
    assert sim.billed_node_seconds() == {"a100-80gb": 0.0} and _states(sim) == ["", "available"]


def test_the_next_event_includes_a_node_coming_up_and_one_going():
    sim = _cloud()
    _submit(sim, "train", 8, run_s=100)
    assert sim.next_event() - sim._created == 480
    _at(sim, 480)
    assert sim.next_event() - sim._created == 580  # the job's end
    _at(sim, 580)
    assert sim.next_event() - sim._created == 1180  # the release


FLEET = """
clusters:
  - name: cloud
    kind: simulator
    flavor: kueue
    region: eu
    location: cloud
    price_per_gpu_hour: 4.0
    nodes:
      - {count: 0, max_nodes: 4, gpu_model: A100, gpu_memory_gb: 80, gpus_per_node: 8, provisioning_s: 300}
"""


def test_a_fleet_file_describes_an_elastic_group_with_defaults_for_what_it_leaves_out():
    [cluster] = parse_fleet(FLEET, source="f.yaml").clusters
    [group] = cluster.node_groups
    assert (group.count, group.max_count, group.provisioning_s, group.idle_release_s) == (0, 4, 300.0, 600.0)


@pytest.mark.parametrize("change, field", [
    ("max_nodes: 4", "count"),  # removed below: count 0 without max_nodes
    ("provisioning_s: 300", "provisioning_s"),
])
def test_a_fleet_file_refuses_elastic_keys_without_max_nodes_naming_the_field(change, field):
    text = FLEET.replace("max_nodes: 4, ", "")
    with pytest.raises(FleetError, match=rf"nodes\[0\]\.{field}"):
        parse_fleet(text, source="f.yaml")


def test_a_fleet_file_refuses_a_maximum_below_the_minimum():
    with pytest.raises(FleetError, match=r"max_nodes: must be at least count \(2\)"):
        parse_fleet(FLEET.replace("count: 0, max_nodes: 4", "count: 2, max_nodes: 1"), source="f.yaml")


def test_a_job_asks_only_for_nodes_of_a_pool_its_class_can_run_on():
    # the replay's hang: a 4 x 4 A100 gang of a local user, with an H100 pool listed first;
    # the H100 nodes were asked for (and billed idle) over and over, the A100s never
    h100 = NodeGroup(count=0, gpu_model="H100", gpu_memory_gb=80, gpus_per_node=8, max_count=2,
                     provisioning_s=480.0, idle_release_s=600.0, name_prefix="cloud-h100-")
    a100 = NodeGroup(count=1, gpu_model="A100", gpu_memory_gb=80, gpus_per_node=8, max_count=4,
                     provisioning_s=480.0, idle_release_s=600.0, name_prefix="cloud-a100-")
    sim = SimulatedCluster("cloud", "kueue", node_groups=[h100, a100], clock=SimClock(), queueing="backfill")
    spec = validate_spec({"project": "p", "name": "gang", "command": "sleep 1", "gpus_per_worker": 4,
                          "workers": 4, "gpu_class": "a100-40gb", "min_gpu_memory_gb": 40,
                          "time_limit_minutes": 600})
    sim.runtimes.set("gang", 60)
    gang = sim.submit(spec, "gang", ProjectIdentity(tenant="t", project="p"))
    # H100s first, then the A100 that is always up, then the A100s that may come
    assert _states(sim) == ["available", "available", "", "requested", "available", "available"]
    _at(sim, 480)
    assert sim.job(gang).state is JobState.RUNNING
    _at(sim, 5000)
    assert "h100-80gb" not in {p for p, s in sim.billed_node_seconds().items() if s > 0}
