"""The broker's presets in the replay place each instant's workloads in one placement pass."""

from __future__ import annotations

from broker.fleet_file import load_fleet
from broker.replay.runner import ReplayConfig, load_jobs, replay_run
from broker.replay.synth import SynthOptions
from broker.services.placing import cycle as placing

from .conftest import FRAGMENTING_TRACE


def test_jobs_arriving_together_share_one_prepared_fleet_and_never_share_a_node(
    db, trace_file, fleet_file, monkeypatch
):
    prepared: list[object] = []
    real = placing.PreparedFleet

    def counting(*args, **kwargs):
        fleet = real(*args, **kwargs)
        prepared.append(fleet)
        return fleet

    monkeypatch.setattr(placing, "PreparedFleet", counting)
    config = ReplayConfig(
        trace=trace_file(FRAGMENTING_TRACE[:4]), fleet=fleet_file(), synth=SynthOptions(gang_fraction=0.0),
        local_share=0.0,
    )
    jobs = load_jobs(config)[1]
    run = replay_run("default", jobs, load_fleet(config.fleet), seed=7, loop="instant")
    assert len(prepared) == 1  # four placements, one fleet read
    # each 3-GPU job on its own 4-GPU node: the pass booked what it had placed
    assert [(o.cluster, o.start_s, o.rejected) for o in run.outcomes.values()] == [("frag", 0.0, 0)] * 4
