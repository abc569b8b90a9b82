"""The demo stopped and started again on the same database keeps its simulated clusters' jobs:
a workload running before a restart ends after it as it would have without the restart, with
its one destination job.  A restart here is what `manage.py demo` does, in-process: the last
save as it stops, then a fresh fleet built from the fleet file with its saved state taken up
(``fleet_start``), then the ticker's passes."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from django.conf import settings
from django.core.management import call_command

from broker import runtime
from broker.backends.sim import SimulatorFleet
from broker.inprocess import beats
from broker.models import DispatchAttempt, Escalation, Workload
from broker.services.submitting.workloads import workload_cancel, workload_submit
from demo.fleet import demo_schedule, fleet_start
from demo.models import SimulatedClusterState
from demo.seed import demo_seed
from demo.services import simulated_clusters_save
from portal.tenancy.models import Project
from django.contrib.auth.models import User

pytestmark = pytest.mark.django_db(transaction=True)  # the demo commits: follow-ups run after each commit

START = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
PASSES = ("inventory", "place-waiting", "status", "reconcile", "save-simulated-clusters")
# (name, GPUs per worker, workers, time limit in minutes): at 120x, a job runs half its limit,
# so a 60-minute limit is 15 s of wall time; the 16- and 24-GPU gangs queue behind each other
ROUNDS = [
    [("r0-small", 1, 1, 30), ("r0-gang", 8, 2, 120), ("r0-long", 8, 2, 240), ("r0-cancelled", 2, 1, 240)],
    [("r1-small", 2, 1, 60), ("r1-gang", 8, 3, 60), ("r1-waits", 8, 2, 60)],
    [("r2-small", 1, 1, 20), ("r2-gang", 8, 2, 90)],
    [("r3-last", 4, 1, 30)],
]


class Demo:
    """The demo on a clock moved by hand (the broker's and the simulated fleet's alike)."""

    def __init__(self) -> None:
        self.now = START
        self.passes = {b.name: b for b in beats(demo_schedule()) if b.name in PASSES}

    def start(self) -> dict[str, int]:
        start = fleet_start(fleet_file=settings.GPUBROKER_FLEET_FILE, time_scale=settings.GPUBROKER_SIM_TIME_SCALE)
        return start.restored.jobs

    def stop(self) -> None:
        simulated_clusters_save()  # what the command does as it stops

    def run_for(self, seconds: int) -> None:
        """The ticker's passes every 5 s of wall time."""
        for _ in range(seconds // 5):
            self.now += timedelta(seconds=5)
            for name in PASSES:
                self.passes[name].task()

    def submit(self, name: str, gpus: int, workers: int, minutes: int) -> Workload:
        spec = {"name": name, "command": "python train.py", "gpu_class": "a100-80gb", "gpus_per_worker": gpus,
                "workers": workers, "time_limit_minutes": minutes}
        return workload_submit(user=User.objects.get(username="researcher"),
                               project_id=Project.objects.get(slug="lattice-qcd").id, spec_data=spec)


def _play(restarts: bool, in_flight: list[int]) -> dict[str, tuple]:
    """Submit a round, run a while, stop for a minute (jobs end while it is down), start again:
    four rounds, three restarts.  Without ``restarts`` the fleet just stands idle that minute.
    ``in_flight`` gets how many workloads were queued or running at a cluster at each stop."""
    demo = Demo()
    with runtime.override(now=lambda: demo.now):
        demo_seed()
        demo.start()
        for number, workloads in enumerate(ROUNDS):
            for spec in workloads:
                demo.submit(*spec)
            demo.run_for(20)
            if number == 0:  # cancelled while running, before the first restart
                workload_cancel(user=User.objects.get(username="researcher"),
                                workload_id=Workload.objects.get(name="r0-cancelled").id)
            if number < 3:
                in_flight.append(Workload.objects.filter(state__in=("queued", "running")).count())
            if number < 3 and restarts:
                demo.stop()
            demo.now += timedelta(minutes=1)
            if number < 3 and restarts:
                assert demo.start(), "nothing was taken up again"
        demo.run_for(180)
    return {w.name: (w.state, w.cluster.name, w.started_at, w.ended_at, w.run_seconds)
            for w in Workload.objects.select_related("cluster")}


def test_three_restarts_end_every_workload_as_without_them_with_one_job_each():
    without = _play(restarts=False, in_flight=[])
    call_command("flush", interactive=False, verbosity=0)
    in_flight: list[int] = []
    with_restarts = _play(restarts=True, in_flight=in_flight)

    assert len(in_flight) == 3 and min(in_flight) > 0, in_flight  # each restart had jobs to keep
    assert with_restarts == without
    states = {name: ended[0] for name, ended in with_restarts.items()}
    assert states.pop("r0-cancelled") == "cancelled"
    assert set(states.values()) == {"completed"}, states
    assert not Escalation.objects.exists()  # none lost, none orphaned
    uids = list(Workload.objects.values_list("uid", flat=True))
    assert sorted(DispatchAttempt.objects.values_list("workload__uid", flat=True)) == sorted(uids)
    fleet = SimulatorFleet.instance()
    jobs = [j.workload_id for name in fleet.names() for j in fleet.get(name).jobs()]
    assert sorted(jobs) == sorted(uids)  # one destination job each, and every one restored


def test_a_database_from_before_saved_states_escalates_its_jobs_as_lost_and_cancels_none():
    demo = Demo()
    with runtime.override(now=lambda: demo.now):
        demo_seed()
        demo.start()
        for spec in ROUNDS[0]:
            demo.submit(*spec)
        demo.run_for(10)
        followed = set(Workload.objects.filter(state__in=("queued", "running")).values_list("name", flat=True))
        SimulatedClusterState.objects.all().delete()  # as if saved by nothing: an older demo
        demo.now += timedelta(minutes=1)
        assert demo.start() == {}
        demo.run_for(60)

    assert followed
    left = dict(Workload.objects.filter(name__in=followed).values_list("name", "state"))
    assert set(left.values()) <= {"queued", "running"}, left  # as last seen: not cancelled, not released
    lost = set(Escalation.objects.filter(kind="lost_job").values_list("workload__name", flat=True))
    assert lost == followed
