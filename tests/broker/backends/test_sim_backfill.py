"""Backfilling local queues of the simulator (queueing="backfill")."""
from __future__ import annotations

import pytest

from broker.backends.base import JobState, Reason
from broker.backends.simulator import NodeGroup, Partition, SimClock, SimulatorBackend, SimulatorFleet
from tests.broker.backends.test_simulator import ORIGIN, a100, spec, submit


@pytest.fixture
def fleet():
    sim = SimulatorFleet.reset(clock=SimClock(origin=ORIGIN))
    yield sim
    SimulatorFleet.reset()


def _cluster(sim_fleet, flavor: str, *groups: NodeGroup, **kw) -> SimulatorBackend:
    sim_fleet.add_cluster("c1", flavor, node_groups=groups or (a100(),),
                          queueing="backfill", **kw)
    return SimulatorBackend("c1")


def test_slurm_backfill_starts_a_short_job_that_ends_before_the_reservation(fleet):
    backend = _cluster(fleet, "slurm", a100(count=1),
                       partitions=[Partition("gpu", default=True)])
    submit(backend, "wl-fill", spec(gpus=6, time_limit_minutes=120), seconds=7200)
    head = submit(backend, "wl-head", spec(gpus=4, time_limit_minutes=60), seconds=600)
    short = submit(backend, "wl-short", spec(gpus=2, time_limit_minutes=60), seconds=600)
    jobs = backend.status([head, short])
    assert (jobs[head].reason, jobs[head].raw_reason) == (Reason.CAPACITY, "Resources")
    assert jobs[short].state is JobState.RUNNING


def test_slurm_backfill_never_delays_the_reserved_job(fleet):
    backend = _cluster(fleet, "slurm", a100(count=1),
                       partitions=[Partition("gpu", default=True)])
    submit(backend, "wl-fill", spec(gpus=6, time_limit_minutes=60), seconds=3600)
    head = submit(backend, "wl-head", spec(gpus=8, time_limit_minutes=60), seconds=600)
    # fits on the 2 free GPUs now, but its limit runs past the head's reservation and
    # the head needs those GPUs then
    long = submit(backend, "wl-long", spec(gpus=2, time_limit_minutes=600), seconds=600)
    jobs = backend.status([head, long])
    assert jobs[long].state is JobState.PENDING
    assert (jobs[long].reason, jobs[long].raw_reason) == (Reason.CAPACITY, "Priority")
    fleet.advance(3600)
    assert backend.status([head])[head].state is JobState.RUNNING


def test_kueue_best_effort_fifo_admits_what_fits_behind_a_waiting_workload(fleet):
    backend = _cluster(fleet, "kueue", a100(count=1))
    submit(backend, "wl-fill", spec(gpus=6), seconds=600)
    head = submit(backend, "wl-head", spec(gpus=4))
    behind = submit(backend, "wl-behind", spec(gpus=1))
    jobs = backend.status([head, behind])
    assert jobs[head].reason is Reason.CAPACITY
    assert jobs[behind].state is JobState.RUNNING


def test_unknown_queueing_mode_is_refused(fleet):
    with pytest.raises(ValueError, match="queueing"):
        fleet.add_cluster("c2", "slurm", node_groups=(a100(),), queueing="lifo")
