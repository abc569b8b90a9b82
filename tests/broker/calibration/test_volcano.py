"""The Volcano calibration: the simulator built from the pool and the Queues' capability as
the Volcano backend reports them, and the player reading starts from the vcjob (a fake API
whose objects are shaped as real Volcano writes them)."""
from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from broker.backends.base import DestinationJob, JobState, Reason
from broker.calibration.jobs import load, parse
from broker.calibration.kube import KubePlayer, volcano_start
from broker.calibration.simulated import NotCalibratable, play, simulator_for_volcano
from broker.cluster_report import InventorySnapshot, NodeInventory, PoolInventory
from broker.local_limits import GroupQuota, LocalLimits
from tests.broker.calibration.helpers import FakeKubeApi

VOLCANO_SLICE = Path(__file__).parent / "data" / "volcano-contended-16gpu.json"
STEADY_SLICE = Path(__file__).parent / "data" / "volcano-steady-16gpu.json"  # the CI test's


def _inventory(allocated: int = 0) -> InventorySnapshot:
    def pool(name: str, model: str, count: int) -> PoolInventory:
        nodes = tuple(NodeInventory(name=f"{name}-{i}", gpu_model=model, gpu_memory_gb=24, gpus_total=4,
                                    gpus_allocatable=4, gpus_allocated=allocated if i == 0 else 0)
                      for i in range(count))
        return PoolInventory(name=name, gpu_model=model, gpu_memory_gb=24, partitioning="whole", owner="volcano",
                             nodes=nodes)
    quotas = (GroupQuota("Volcano queue calib-v (capability nvidia.com/gpu=8)", scope="calib-v", limit_gpus=8),
              GroupQuota("Volcano queue small-q (capability nvidia.com/gpu=2)", scope="small-q", limit_gpus=2))
    return InventorySnapshot(cluster="k", taken_at=datetime(2026, 12, 4, tzinfo=UTC),
                             pools=(pool("L4", "L4", 4), pool("L40S", "L40S", 3)), limits=LocalLimits(quotas=quotas))


def _sim():
    return simulator_for_volcano(_inventory(), ["calib-v", "calib-v-local"], "L4")


def test_the_simulator_has_the_pools_nodes_and_its_queues_capability_only():
    sim = _sim()
    assert [n.name for n in sim.nodes] == ["L4-0", "L4-1", "L4-2", "L4-3"]
    assert sim.flavor == "volcano" and sim.queueing == "backfill"
    assert sim.queue_caps == {"calib-v": 8}  # small-q is not the calibration's; calib-v-local has none


def test_a_missing_or_busy_pool_is_refused_saying_which():
    with pytest.raises(NotCalibratable, match=r"pool 'H100': not in k's inventory \(L4, L40S\)"):
        simulator_for_volcano(_inventory(), ["calib-v"], "H100")
    with pytest.raises(NotCalibratable, match=r"pool 'L4' is not idle: L4-0 \(2 of 4 GPUs\) allocated"):
        simulator_for_volcano(_inventory(allocated=2), ["calib-v"], "L4")


def _one(name: str, at: float, gpus: int, workers: int = 1, local: bool = False, run: float = 10) -> dict:
    return {"name": name, "at_s": at, "gpus_per_worker": gpus, "workers": workers, "run_s": run,
            "time_limit_min": 1, "local": local}


def test_the_queues_capability_holds_its_gangs_back_while_the_pool_has_room():
    jobs = parse({"name": "t", "jobs": [_one("a", 0, 4, 2), _one("b", 1, 2, 2), _one("c", 2, 4, local=True),
                                         _one("d", 3, 4, 3)]})
    played = play(_sim(), jobs, [1.5, 2.5, 3.5], queue="calib-v", local_queue="calib-v-local")
    a, b, c, d = (played.jobs[n] for n in "abcd")
    # each starts one Volcano session (1 s) after it is enqueued: its pods are made between
    assert a.started_s == 1 and c.started_s == 3  # the local queue has no capability
    assert b.started_s == 12  # 8 + 4 would pass calib-v's 8 GPUs though 4 GPUs were free
    assert played.reasons[2.5] == {"b": "capacity", "c": "none"}
    assert d.started_s is None and played.reasons[3.5]["d"] == "policy"  # 12 GPUs: never in calib-v


def test_a_small_gang_enqueued_first_keeps_a_bigger_one_out_of_the_queue():
    # a (4 GPUs) runs; b (8) cannot pass calib-v's 8 while a runs; c (2) can and is enqueued,
    # though the nodes have no room for it yet: when a ends, c's 2 GPUs keep b out again
    jobs = parse({"name": "t", "jobs": [_one("fill", 0, 4, 3, local=True, run=15), _one("a", 0, 2, 2, run=10),
                                         _one("b", 1, 4, 2, run=10), _one("c", 2, 2, run=10)]})
    played = play(_sim(), jobs, [5.0], queue="calib-v", local_queue="calib-v-local")
    assert played.reasons[5.0] == {"b": "capacity", "c": "capacity"}  # b: the queue; c: the nodes
    assert played.jobs["c"].started_s == 11 and played.jobs["b"].started_s == 22


@pytest.mark.parametrize("path", [VOLCANO_SLICE, STEADY_SLICE], ids=["first", "steady"])
def test_the_shipped_volcano_slices_are_contended_on_the_simulator(path):
    jobs = load(path)
    assert 30 <= len(jobs.jobs) <= 40 and sum(j.local for j in jobs.jobs) >= 0.25 * len(jobs.jobs)
    assert all(j.run_s < j.time_limit_min * 60 for j in jobs.jobs)  # kwok enforces no pod deadline
    played = play(_sim(), jobs, [float(t) for t in range(200)], queue="calib-v", local_queue="calib-v-local")
    waited = [o for o in played.jobs.values() if (o.started_s or 1e9) - o.submitted_s >= 2.0]
    assert len(waited) >= 0.3 * len(jobs.jobs)
    gangs = {j.name for j in jobs.jobs if j.workers > 1}
    assert any("gang" in r for at in played.reasons.values() for n, r in at.items() if n in gangs)
    assert {o.state for o in played.jobs.values()} >= {"completed", "cancelled"}
    # the gang past the broker queue's capability (8 GPUs) waits by rule and never runs
    over = [j.name for j in jobs.jobs if not j.local and j.gpus > 8]
    assert len(over) == 1 and played.jobs[over[0]].started_s is None
    assert any(n == over[0] and r == "policy" for at in played.reasons.values() for n, r in at.items())


class FakeVolcano(FakeKubeApi):
    """vcjobs and PodGroups as the API lists them; the script moves them on each sample."""

    kind = "volcano"

    def __init__(self) -> None:
        super().__init__()
        self.queues: list[str] = []

    def submit(self, spec, workload_id, identity):
        self.jobs[workload_id] = {"metadata": {"name": workload_id, "namespace": "team"}, "phase": "Pending"}
        self.queues.append(identity.queue)
        return f"team/{workload_id}"

    def calibration_jobs(self, namespace, project):
        return [(job, None) for job in self.jobs.values()]

    def describe(self, job, pod_group):
        state = {"Pending": JobState.PENDING, "Running": JobState.RUNNING, "Completed": JobState.COMPLETED}
        at = {k: datetime.fromtimestamp(v, tz=UTC) for k, v in job.get("at", {}).items()}
        return DestinationJob(job_id="x", workload_id=None, state=state[job["phase"]],
                              reason=Reason.GANG if job["phase"] == "Pending" else Reason.NONE,
                              raw_reason="NotEnoughResources: 2/2 tasks in gang unschedulable",
                              started_at=at.get("Running"), ended_at=at.get("Completed"))


def test_the_player_takes_a_gangs_start_from_its_vcjob_running_and_leaves_nothing_behind():
    api, now = FakeVolcano(), [1000.0]
    jobs = parse({"name": "t", "jobs": [_one("a", 0, 2, 2, run=5), _one("b", 1, 4, local=True)]})

    def step(seconds: float) -> None:
        now[0] += max(seconds, 0.5)
        a = api.jobs.get(f"{player.tag}-a")
        if a is not None and now[0] >= 1003:
            a["phase"], a["at"] = "Running", {"Running": 1002.0}
        if a is not None and now[0] >= 1008:
            a["phase"], a["at"] = "Completed", {"Running": 1002.0, "Completed": 1007.0}

    player = KubePlayer(api, namespace="team", queue="calib-v", local_queue="calib-v-local", gpu_models=["L4"],
                        start=volcano_start, clock=lambda: now[0], sleep=step)
    played = player.play(jobs, deadline_s=20)
    a, b = played.jobs["a"], played.jobs["b"]
    assert played.side == "volcano on Kubernetes v1.36.5"
    assert api.queues == ["calib-v", "calib-v-local"]
    assert a.started_s == 2.0 and a.ended_s == 7.0 and a.state == "completed"
    assert b.started_s is None and played.reasons[1.0] == {"a": "gang", "b": "gang"}
    assert f"team/{player.tag}-b" in api.cancelled
