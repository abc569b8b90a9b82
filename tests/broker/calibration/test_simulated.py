"""The simulator's side: built from the partition's inventory and limits as the backend
reports them, played at the job list's instants."""
from __future__ import annotations

import pytest

from broker.calibration.compare import started_ahead
from broker.calibration.simulated import NotCalibratable, play, simulator_for
from tests.broker.calibration.helpers import inventory, shipped


def test_the_simulator_has_the_partitions_nodes_and_its_per_job_cap():
    sim = simulator_for(inventory(cap=4), "calib")
    assert [(n.name, n.gpus, n.partition) for n in sim.nodes] == [("n1", 8, "calib"), ("n2", 8, "calib")]
    assert sim.partitions["calib"].max_gpus_per_job == 4 and sim.queueing == "backfill"


def test_a_partition_not_idle_or_not_there_is_refused_saying_which():
    with pytest.raises(NotCalibratable, match=r"not idle: n2 \(3 of 8 GPUs\) allocated"):
        simulator_for(inventory(allocated=3), "calib")
    with pytest.raises(NotCalibratable, match=r"partition 'nope': not in ci's inventory \(calib, gpu\)"):
        simulator_for(inventory(), "nope")


def test_the_shipped_slice_is_contended_on_the_simulator():
    played = play(simulator_for(inventory(), "calib"), shipped(), samples=[float(t) for t in range(0, 120, 5)])
    started = [o for o in played.jobs.values() if o.started_s is not None]
    waited = [o for o in started if o.started_s - o.submitted_s >= 2.0]
    assert len(waited) >= 0.3 * len(played.jobs)
    assert len(started_ahead(played, 2.0)) >= 3
    assert any(reasons for reasons in played.reasons.values())


def test_a_job_past_its_limit_is_killed_at_it_and_a_cancelled_waiting_job_never_starts():
    played = play(simulator_for(inventory(), "calib"), shipped(), samples=[])
    overrun = played.jobs["overrun"]
    assert overrun.state == "timeout" and overrun.ended_s - overrun.started_s == 60.0
    cancelled = [o for o in played.jobs.values() if o.state == "cancelled"]
    assert cancelled and all(o.started_s is None for o in cancelled)


def test_a_cap_below_a_jobs_ask_leaves_it_waiting_on_policy():
    played = play(simulator_for(inventory(cap=4), "calib"), shipped(), samples=[3.0])
    assert played.reasons[3.0]["gang-16"] == "policy"
    assert played.jobs["gang-16"].started_s is None
